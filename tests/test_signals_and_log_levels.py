"""How a run is stopped from outside and which events reach the console, at their edges (ninth audit,
class-wide: the eighth audit's survivors here were exit codes and filters tested on one side only).

- `stop_on_signals`: within the block SIGTERM raises `Interrupted` carrying the signal (exit code
  143, named SIGTERM); on the way out the previous handler is back; a SIGTERM this process
  ignores stays ignored; outside the main thread nothing is installed (Python would refuse).
- `stopped_message` for each combination of a last step (0 is a step) and a planned count (0 or
  None: not known).
- The console's level filter keeps an event exactly at the level and drops the one below it, in
  structlog and in the lazy logger that drops events before structlog is imported; `verbose`
  shows debug events whatever the level; an unknown level name reads as info.
- `log_events_to` tags lines with the run id it is given; `keep_last_runs` refuses a negative count;
  run ids sort by their start time.

Signals are raised in-process with `signal.raise_signal` (the handler runs before the next line,
no timing involved).
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
from pathlib import Path

import pytest

from beyondagent_core import events, logs
from beyondagent_core.events import keep_last_runs, new_run_id
from beyondagent_core.interrupts import Interrupted, signal_name, stop_on_signals, stopped_message
from beyondagent_core.logs import configure_logging, get_logger, log_events_to


@pytest.fixture
def sigterm_handler():
    """SIGTERM's handler as the test found it, put back afterwards."""
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)


def test_sigterm_within_the_block_is_an_interrupt_and_the_old_handler_comes_back(sigterm_handler) -> None:
    calls = []

    def before(signum, frame):
        calls.append(signum)

    signal.signal(signal.SIGTERM, before)
    with pytest.raises(Interrupted) as info:
        with stop_on_signals():
            signal.raise_signal(signal.SIGTERM)
    assert info.value.signum == signal.SIGTERM and info.value.exit_code == 143
    assert info.value.signal_name == "SIGTERM" and signal_name(info.value) == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is before
    signal.raise_signal(signal.SIGTERM)
    assert calls == [signal.SIGTERM]
    assert signal_name(KeyboardInterrupt()) == "SIGINT" and Interrupted().exit_code == 130


def test_an_ignored_sigterm_stays_ignored(sigterm_handler) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with stop_on_signals():
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        signal.raise_signal(signal.SIGTERM)  # ignored: nothing raised
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_outside_the_main_thread_nothing_is_installed(sigterm_handler) -> None:
    seen: list[object] = []

    def in_a_thread() -> None:
        try:
            with stop_on_signals():
                seen.append(signal.getsignal(signal.SIGTERM))
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            seen.append(exc)

    before = signal.getsignal(signal.SIGTERM)
    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    assert seen == [before]


@pytest.mark.parametrize(("last_step", "planned", "message"), [
    (None, None, "stopped before its first step"),
    (None, 0, "stopped before its first step"),
    (None, 80, "stopped before its first step (of 80)"),
    (0, 80, "stopped at step 0 of 80"),
    (20, None, "stopped at step 20"),
    (20, 80, "stopped at step 20 of 80"),
])
def test_where_a_run_stopped(last_step, planned, message: str) -> None:
    assert stopped_message(last_step, planned) == message


@pytest.mark.parametrize(("level", "verbose", "shown", "hidden"), [
    ("warning", False, ["at.warning", "at.error"], ["at.info", "at.debug"]),
    ("error", False, ["at.error"], ["at.warning", "at.info"]),
    ("info", False, ["at.info", "at.warning"], ["at.debug"]),
    ("debug", False, ["at.debug", "at.info"], []),
    ("error", True, ["at.debug", "at.info", "at.error"], []),
    ("loud", False, ["at.info"], ["at.debug"]),  # not a level name: info
])
def test_the_console_keeps_events_at_the_level_and_drops_those_below(capsys, level: str, verbose: bool,
                                                                     shown: list[str], hidden: list[str]) -> None:
    configure_logging(verbose=verbose, level=level)
    log = get_logger("test.levels")
    log.debug("at.debug")
    log.info("at.info")
    log.warning("at.warning")
    log.error("at.error")
    err = capsys.readouterr().err
    for event in shown:
        assert event in err, (event, err)
    for event in hidden:
        assert event not in err, (event, err)


@pytest.mark.parametrize(("level", "kept", "dropped"), [
    ("warning", ["warning", "error", "exception", "bind"], ["info", "msg", "debug"]),
    ("error", ["error", "critical"], ["warning", "warn", "info"]),
    ("debug", ["debug", "info"], []),
])
def test_the_lazy_logger_drops_below_the_level_before_structlog_is_imported(monkeypatch, level: str,
                                                                            kept: list[str],
                                                                            dropped: list[str]) -> None:
    # configure_logging notes its settings this way while structlog is not imported yet
    monkeypatch.setattr(logs, "_pending", {"verbose": False, "level": level})
    assert "structlog" in sys.modules  # so the kept methods can be structlog's, without configuring it
    monkeypatch.setattr(logs, "apply_pending", lambda: None)
    for method in dropped:
        assert getattr(logs.LazyLogger("t"), method) is logs._ignore, method
    for method in kept:
        assert getattr(logs.LazyLogger("t"), method) is not logs._ignore, method
    monkeypatch.setattr(logs, "_pending", {"verbose": True, "level": "error"})
    assert logs.LazyLogger("t").debug is not logs._ignore


def test_events_carry_the_run_id_they_are_given(tmp_path: Path) -> None:
    configure_logging()
    path = tmp_path / "events.jsonl"
    try:
        assert log_events_to(path, run_id="20260101T000000.000000Z-abcdef") == "20260101T000000.000000Z-abcdef"
        get_logger("t").info("tagged")
    finally:
        assert log_events_to(None) is None
    get_logger("t").info("after.the.run")  # the file is closed: not written
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(line["run_id"], line["event"]) for line in lines] == [("20260101T000000.000000Z-abcdef", "tagged")]


def test_keep_last_runs_refuses_a_negative_count_and_run_ids_sort_by_time(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"run_id": "a", "event": "x"}\n')
    with pytest.raises(ValueError, match="keep must be 0 or more, got -1"):
        keep_last_runs(path, -1)
    monkeypatch.setattr(events.time, "time", lambda: 1767225600.03125)  # 2026-01-01, 31250 microseconds
    assert re.fullmatch(r"20260101T000000\.031250Z-[0-9a-f]{6}", new_run_id())  # zero-padded: sorts by time
