"""A run stopped from outside ends like a run (issue 36, item 6): SIGTERM (what `timeout` and `kill` send)
and Ctrl-C (SIGINT) both leave a report that says where the run stopped and a final `run.finished`
event with `status: interrupted`, "stopped at step N of 80" and the signal; the command exits with
128 + the signal's number. Before, SIGTERM killed the process on the spot (no report, no final
event: `events.jsonl` looked as if the run were still going).

The real CLI in a subprocess with a third-party backend that reports three steps, then works on step 4
until it is stopped (so it cannot finish first on a loaded machine).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")  # the report's curves

BACKEND = """
import time

import attrs

from beyondagent_core import BackendSpec, TaskSourceSpec, Task, hookimpl
from beyondagent_core.jsonl import append_jsonl


@attrs.define
class Config:
    steps: int = 80


class Tasks:
    def __init__(self, config):
        pass

    def load(self, bad):
        return [Task(task_id=f"t{i}", env="none", query="q") for i in range(4)]


class Ticker:
    def __init__(self, config):
        self.config = config

    def train(self, data, run):
        run.planned_steps = self.config.steps
        for step in range(1, self.config.steps + 1):
            time.sleep(0.05)
            append_jsonl(run.run_dir / "metrics.jsonl", [{"step": step, "time": time.time(),
                                                           "train/reward_mean": step / 100}])
            run.step_finished(step, {"train/reward_mean": step / 100})
            while step == 3:  # step 4 never ends: the run cannot finish before the test stops it
                time.sleep(0.05)
        return {"steps": self.config.steps}


@hookimpl
def beyondagent_backends():
    return [BackendSpec(name="ticker", factory=Ticker, config_cls=Config)]


@hookimpl
def beyondagent_task_sources():
    return [TaskSourceSpec(name="four", factory=Tasks, config_cls=attrs.make_class("FourConfig", {}))]
"""
SPEC = "run: {name: ticking}\ntasks:\n  train: {name: four}\nmixture: {name: original}\nbackend: {name: ticker}\n"


def events(run_dir: Path) -> list[dict]:
    """The run's events so far; a last line it is still writing is not one yet (read while it runs)."""
    path = run_dir / "events.jsonl"
    found = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            found.append(json.loads(line))
        except ValueError:
            break
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_writes_its_report_and_a_final_event(make_dist, site: Path, tmp_path: Path,
                                                           signum: int) -> None:
    make_dist("ticker-plugin", "ticker", "ticker_plugin", BACKEND)
    (tmp_path / "spec.yaml").write_text(SPEC)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("BEYONDAGENT_")}
    environment.update(PYTHONPATH=os.pathsep.join([str(site), str(Path(__file__).resolve().parents[1])]),
                       BEYONDAGENT_PLUGINS="ticker,mixers,report")
    # Ctrl-C's default action back in the child: pytest-xdist's workers ignore SIGINT, their children
    # inherit that, and a run ignoring a signal lets it be (interrupts.py) - it then never stopped.
    process = subprocess.Popen([sys.executable, "-m", "beyondagent_core.cli", "run", "spec.yaml"], cwd=tmp_path,
                               env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    run_dir = tmp_path / "runs" / "ticking"
    deadline = time.monotonic() + 60
    while not any(e.get("event") == "train.step" and e.get("step", 0) >= 3 for e in events(run_dir)):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, err[-3000:]
    last = events(run_dir)[-1]
    name = signal.Signals(signum).name
    assert last["event"] == "run.finished" and last["status"] == "interrupted", last
    step = last["step"]
    assert step == 3 and last["total_steps"] == 80 and last["signal"] == name
    assert last["stopped"] == f"stopped at step {step} of 80 ({name})"
    assert f"interrupted: stopped at step {step} of 80 ({name})" in err and "Traceback" not in err
    report = (run_dir / "report.html").read_text()
    assert f"The run did not finish: stopped at step {step} of 80 ({name})." in report
