"""A run stopped from outside (Ctrl-C, SIGTERM from `timeout`, `kill` or a scheduler) ends like any run.

Python turns Ctrl-C into `KeyboardInterrupt`; SIGTERM would end the process on the spot, with no
report and no final event, so `events.jsonl` would look as if the run were still going.
`stop_on_signals()` makes SIGTERM raise `Interrupted` (a `KeyboardInterrupt`) in the main thread
for the run's duration, so both unwind through the backend (its subprocesses stopped, its files
closed) to `pipeline.run`, which writes the report and a final `run.finished` event with
`status: interrupted` and where it stopped (`stopped_message`: "stopped at step 20 of 80").
The command then exits with 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGTERM,)


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; `str()` says where it stopped, once `pipeline.run` knows."""

    def __init__(self, message: str = "", *, signum: int = signal.SIGINT):
        super().__init__(message)
        self.signum = signum

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def signal_name(exc: BaseException) -> str:
    """`SIGTERM` for an `Interrupted` by it, `SIGINT` (Ctrl-C) for any other KeyboardInterrupt."""
    return exc.signal_name if isinstance(exc, Interrupted) else "SIGINT"


def stopped_message(last_step: int | None, planned_steps: int | None) -> str:
    """`stopped at step 20 of 80`, `stopped before its first step`, `stopped at step 20`."""
    if last_step is None:
        return "stopped before its first step" + (f" (of {planned_steps})" if planned_steps else "")
    return f"stopped at step {last_step}" + (f" of {planned_steps}" if planned_steps else "")


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM raises `Interrupted` in the main thread (elsewhere: nothing changes).

    A signal this process ignores (`nohup`, a parent's choice) stays ignored; the previous handlers
    are put back on the way out.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupted(signum: int, frame: Any) -> None:
        raise Interrupted(signum=signum)

    previous = {}
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, raise_interrupted)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
