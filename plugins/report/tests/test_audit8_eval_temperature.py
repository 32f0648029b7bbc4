"""`beyondagent eval --temperature` reaches the eval's settings (eighth audit).

The dry run says the temperature the episodes would be sampled at, and the eval's directory (a
hash of what decides its numbers) differs between two temperatures: an eval at 0.25 never
resumes one at the default 1.0. The real CLI in a subprocess; no endpoint is asked anything.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart.yaml"

pytest.importorskip("beyondagent_plugin_gym")


def dry_run(tmp_path: Path, *extra: str) -> tuple[str, str]:
    """(the temperature the dry run names, the eval directory it would write)."""
    env = {**os.environ, "BEYONDAGENT_PLUGINS": "gym,mixers,torch", "COLUMNS": "1000"}
    env.pop("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", None)
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "eval", str(QUICKSTART),
                           f"run.output_dir={tmp_path / 'runs'}", "tasks.val.count=2", "--model", "policy",
                           "--base-url", "http://127.0.0.1:9/v1", "--k", "2", *extra, "--dry-run"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"\(temperature ([0-9.]+)\); 0 episodes already done in (\S+)", proc.stdout)
    assert found, proc.stdout
    return found.group(1), found.group(2)


def test_the_temperature_option_reaches_the_eval(tmp_path: Path) -> None:
    default_temperature, default_dir = dry_run(tmp_path)
    temperature, out = dry_run(tmp_path, "--temperature", "0.25")
    assert (default_temperature, temperature) == ("1.0", "0.25")
    assert out != default_dir and Path(out).parent == Path(default_dir).parent
