"""A pytest plugin for CI's phase timings: the seconds each test suite took (the core's `tests/`,
each `plugins/<x>/tests`), printed at the end of the run, the slowest first.

Loaded by scripts/test.sh (`-p suite_times`, with this directory on PYTHONPATH); the seconds are
each test's setup, call and teardown, so a suite's module-scoped fixtures count where they run.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

_seconds: dict[str, float] = defaultdict(float)
_tests: dict[str, int] = defaultdict(int)


def suite_of(nodeid: str) -> str:
    """`plugins/torch/tests/test_x.py::t` -> `plugins/torch`; `tests/test_y.py::t` -> `tests`."""
    parts = Path(nodeid.split("::", 1)[0]).parts
    if len(parts) >= 2 and parts[0] == "plugins":
        return f"plugins/{parts[1]}"
    return parts[0] if parts else nodeid


def pytest_runtest_logreport(report: Any) -> None:
    suite = suite_of(report.nodeid)
    _seconds[suite] += report.duration
    if report.when == "call":
        _tests[suite] += 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _seconds:
        return
    terminalreporter.section("seconds per suite")
    for suite, seconds in sorted(_seconds.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{seconds:8.0f} s  {_tests[suite]:5d} tests  {suite}")
    terminalreporter.write_line(f"{sum(_seconds.values()):8.0f} s  {sum(_tests.values()):5d} tests  in all")
