"""The torch backend stopped by SIGTERM mid-run (what `timeout` sends; issue 36, item 6): the process
exits 143 within seconds, `events.jsonl` ends with `run.finished` (`status: interrupted`, "stopped at
step N of 80") and `report.html` says so. The quickstart, shrunk, in a subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_sigterm_mid_run_leaves_a_report_and_a_final_event(tmp_path: Path) -> None:
    pytest.importorskip("beyondagent_plugin_gym")
    process = subprocess.Popen(
        [sys.executable, "-m", "beyondagent_core.cli", "run", "examples/quickstart.yaml", f"run.output_dir={tmp_path}",
         "tasks.val=null", "backend.batch_size=1", "algorithm.group_size=2", "backend.save_every=0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    events = tmp_path / "quickstart" / "events.jsonl"
    deadline = time.monotonic() + 240
    while '"train.step"' not in (events.read_text() if events.is_file() else ""):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    stopped_at = time.monotonic()
    out, err = process.communicate(timeout=60)
    print(f"exited {time.monotonic() - stopped_at:.1f} s after SIGTERM")
    assert process.returncode == 143, err[-3000:]
    last = json.loads(events.read_text().splitlines()[-1])
    assert last["event"] == "run.finished" and last["status"] == "interrupted" and last["total_steps"] == 80, last
    assert last["stopped"] == f"stopped at step {last['step']} of 80 (SIGTERM)"
    assert "The run did not finish: stopped at step" in (tmp_path / "quickstart" / "report.html").read_text()
