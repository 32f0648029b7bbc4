"""No planted secret reaches a file the torch backend writes, in a dry run or a real run (issue 36, item 3).

Secrets in a URL (userinfo, a query value, a path token, a fragment) and a whole value from an
environment variable are planted with overrides (`beyondagent_core.testing.planted_secrets`); every
file under the output directory (checkpoints included, as bytes) and what the command printed are
searched. verl's and trinity's tests do the same for their dry runs (their worker spec files).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from beyondagent_core.testing.planted_secrets import PLANTED_ENV, PLANTED_OVERRIDES, files_under, leaks

ROOT = Path(__file__).resolve().parents[3]


def quickstart(tmp_path: Path) -> Path:
    pytest.importorskip("beyondagent_plugin_gym")
    data = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["tasks"]["train"]["count"] = 2
    data["tasks"]["val"]["count"] = 2
    data["algorithm"]["group_size"] = 2
    data["backend"].update({"total_steps": 2, "batch_size": 1, "eval_every": 1, "save_every": 1})
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, **PLANTED_ENV}
    return subprocess.run([sys.executable, "-m", "beyondagent_core.cli", *args, *PLANTED_OVERRIDES], cwd=ROOT,
                          env=environment, capture_output=True, text=True, timeout=300, check=False)


def test_a_torch_dry_run_and_run_write_no_planted_secret(tmp_path: Path) -> None:
    spec = str(quickstart(tmp_path))
    dry = run("run", spec, "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert leaks(tmp_path / "runs", dry.stdout + dry.stderr) == []
    started = time.monotonic()
    done = run("run", spec)
    print(f"2-step torch run: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stderr[-3000:]
    written = files_under(tmp_path / "runs")
    names = {path.name for path in written}
    assert {"spec.resolved.yaml", "events.jsonl", "metrics.jsonl", "report.html"} <= names, names
    assert leaks(tmp_path / "runs", done.stdout + done.stderr) == [], [str(p) for p in written]
