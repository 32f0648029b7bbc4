"""`events.jsonl`: every line carries the run id of the command that wrote it, and the file keeps
the last `KEEP_RUNS` runs' events (`beyondagent_core.events`), through the real structlog setup."""

from __future__ import annotations

import json
from pathlib import Path

from beyondagent_core.events import KEEP_RUNS, keep_last_runs, runs_in
from beyondagent_core.logs import configure_logging, get_logger, log_events_to


def test_each_line_carries_its_run_id_and_only_the_last_runs_are_kept(tmp_path: Path) -> None:
    configure_logging()
    log = get_logger("test.events")
    path = tmp_path / "events.jsonl"
    path.write_text('{"event": "written before run ids", "level": "info"}\n', encoding="utf-8")
    ids = []
    try:
        for number in range(KEEP_RUNS + 3):  # a run directory run again and again
            ids.append(log_events_to(path))
            log.info("test.first", number=number)
            log.warning("test.second", number=number)
    finally:
        log_events_to(None)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)  # unique, and in start order
    assert len(lines) == 2 * KEEP_RUNS  # was: every line of every run, forever
    assert [line["run_id"] for line in lines] == [run_id for run_id in ids[-KEEP_RUNS:] for _ in range(2)]
    assert [line["number"] for line in lines[::2]] == list(range(3, KEEP_RUNS + 3))
    assert all(next(iter(line)) == "run_id" for line in lines)
    assert runs_in(path) == ids[-KEEP_RUNS:]


def test_lines_from_before_run_ids_are_the_oldest_run(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"event": "old"}\n{"run_id": "b", "event": "x"}\n\n{"run_id": "c", "event": "y"}'
                     b'\n{"run_id": "b", "event": "z"}')  # the last line torn by a killed run
    assert runs_in(path) == [None, "b", "c"]
    assert keep_last_runs(path, 3) == 0 and keep_last_runs(path, 2) == 1
    assert path.read_bytes() == b'{"run_id": "b", "event": "x"}\n{"run_id": "c", "event": "y"}\n' \
                                b'{"run_id": "b", "event": "z"}\n'
    assert keep_last_runs(path, 0) == 2 and path.read_bytes() == b""
    assert keep_last_runs(tmp_path / "none.jsonl", 1) == 0
