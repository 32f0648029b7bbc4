"""A killed exploration resumes where it stopped: nothing lost, nothing twice.

A child process explores slowly into a cache and is killed with SIGKILL mid-run; the run is
then resumed here and the cache and checkpoint are checked line by line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from explore_resume_parts import SEEDS, N, explore

from beyondagent_core.exploration.checkpoint import checkpoint_path
from beyondagent_core.jsonl import read_tasks


def jobs_done(cache: Path) -> list[str]:
    path = checkpoint_path(cache)
    if not path.is_file():
        return []
    return [json.loads(line)["job"] for line in path.read_text().splitlines() if '"job"' in line]


def test_resume_after_kill_loses_and_repeats_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "synthetic.jsonl"
    child = subprocess.Popen([sys.executable, str(Path(__file__).with_name("explore_resume_parts.py")),
                              str(cache), "0.15"], env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)})
    try:
        deadline = time.monotonic() + 60
        while len(jobs_done(cache)) < 6 and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.02)
        assert child.poll() is None, "the child finished before it could be killed"
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        child.kill()
    before = jobs_done(cache)
    assert 6 <= len(before) < len(SEEDS) * N

    result = explore(cache, delay=0.0)

    done = jobs_done(cache)
    assert sorted(done) == sorted(f"{seed.task_id}#{i}" for seed in SEEDS for i in range(N))
    assert len(done) == len(set(done))
    assert result.resumed == len(before)
    cached = read_tasks(cache)
    assert cached == result.tasks
    assert len(cached) == 2 * len(SEEDS) * N
    ids = [task.task_id for task in cached]
    assert len(set(ids)) == len(ids)
    for seed in SEEDS:  # each seed's summaries saw 0, 2, 4, ... known tasks: no exploration lost or doubled
        queries = sorted(int(t.query.split()[-1]) for t in cached if t.seed_task_id == seed.task_id)
        assert queries == sorted([2 * j for j in range(N)] + [2 * j + 1 for j in range(N)])
