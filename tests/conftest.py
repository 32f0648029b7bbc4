"""Shared helpers for the core's tests: running the real CLI, and making plugin distributions.

`make_dist` writes a real installed-distribution layout (`<name>.dist-info` with METADATA and
entry_points.txt, plus the plugin module) into a folder that goes on PYTHONPATH, which is
exactly what importlib.metadata reads after `pip install`; the pip path itself is covered by
tests/test_outside_plugin.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _structlog_config_restored():
    """A test that configures logging (the CLI in-process, `configure_logging`) must not leave its
    level filter behind: `capture_logs` in a later test swaps processors only, so an INFO filter
    left over silently drops the debug events that test counts."""
    import structlog

    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@attrs.frozen
class CliResult:
    code: int
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder for made-up distributions; put on PYTHONPATH by `cli`."""
    path = tmp_path / "site"
    path.mkdir()
    return path


@pytest.fixture
def make_dist(site: Path):
    def make(dist: str, entry_point: str, module: str, source: str, version: str = "1.0.0") -> None:
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[beyondagent]\n{entry_point} = {module}\n")
        (site / f"{module}.py").write_text(textwrap.dedent(source))

    return make


@pytest.fixture
def cli(site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Run `beyondagent ...` in a subprocess, in tmp_path, with `site` on PYTHONPATH."""

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> CliResult:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("BEYONDAGENT_")}
        environment["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
        environment.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-m", "beyondagent_core.cli", *args],
            cwd=cwd or tmp_path, env=environment, capture_output=True, text=True, timeout=120,
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run
