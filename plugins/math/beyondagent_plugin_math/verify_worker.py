"""math-verify in a child process, safe to call from any thread, with a hard timeout.

Why a process: math-verify (sympy underneath) can take unbounded time on some inputs (a model
writing `10^{10^{10}}` hangs it in C code that no signal interrupts), and its own timeouts use
`signal.alarm`, which works only on the main thread, never in the worker threads and event
loops where judges run. So the parent sends `(predicted, reference)` to one long-lived child
(a fresh interpreter, so no torch state is forked); the child runs math-verify on its main thread with
its signal timeouts on; the parent waits at most `hard_timeout` seconds and, past that, kills
the child (a new one starts on the next call) and reports a timeout. Calls are serialized by
a lock: each takes milliseconds, and plain numbers never get here (see `numbers.py`).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from typing import IO, Any

import attrs

from beyondagent_core.logs import get_logger

log = get_logger("beyondagent.math.verify")

STARTUP_TIMEOUT = 120.0  # importing sympy on a busy machine


@attrs.frozen
class Verdict:
    """math-verify's answer: `equal` None when it could not decide (unparseable, timeout, crash)."""

    equal: bool | None
    reason: str = ""


class VerifyWorker:
    """One child process running math-verify; `check(predicted, reference)` from any thread.

    The child is `python -m beyondagent_plugin_math.verify_worker`, speaking JSON lines over
    its stdin/stdout (no multiprocessing, so it works whatever the parent's `__main__` is).
    """

    def __init__(self, *, parse_timeout: int = 5, verify_timeout: int = 5, hard_timeout: float = 15.0):
        self.parse_timeout = parse_timeout
        self.verify_timeout = verify_timeout
        self.hard_timeout = hard_timeout
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def check(self, predicted: str, reference: str) -> Verdict:
        with self._lock:
            for attempt in range(2):
                try:
                    process = self._ensure_started()
                    _send(process, {"predicted": predicted, "reference": reference})
                    reply = _receive(process, self.hard_timeout)
                except (OSError, ValueError) as exc:
                    self._stop()
                    if attempt == 1:
                        return Verdict(None, f"math-verify worker failed: {type(exc).__name__}: {exc}")
                    continue
                if reply is None:
                    self._stop()
                    log.warning("math.verify.timeout", predicted=predicted[:80], seconds=self.hard_timeout)
                    return Verdict(None, f"math-verify took longer than {self.hard_timeout:g}s (worker restarted)")
                return Verdict(reply.get("equal"), str(reply.get("reason", "")))
            return Verdict(None, "math-verify worker failed")

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _ensure_started(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._stop()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        process = subprocess.Popen(
            [sys.executable, "-u", "-m", "beyondagent_plugin_math.verify_worker",
             str(self.parse_timeout), str(self.verify_timeout)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self._process = process
        ready = _receive(process, STARTUP_TIMEOUT)
        if not ready or not ready.get("ready"):
            raise OSError("the math-verify worker did not start (is math-verify installed?)")
        return process

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            pass
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def _send(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()


def _receive(process: subprocess.Popen[bytes], timeout: float) -> dict[str, Any] | None:
    """The child's next reply line; None if none came within `timeout`. OSError if the child is gone."""
    stdout: IO[bytes] | None = process.stdout
    assert stdout is not None
    readable, _, _ = select.select([stdout], [], [], timeout)
    if not readable:
        return None
    line = stdout.readline()
    if not line:
        raise OSError(f"the math-verify worker exited (code {process.poll()})")
    return json.loads(line)


def serve(parse_timeout: int, verify_timeout: int) -> None:
    """The child's loop: read `{predicted, reference}` lines, answer `{equal: bool | null, reason}`."""
    import logging

    logging.disable(logging.WARNING)  # math-verify logs every timeout; the parent reports them
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]

    def parsed(text: str) -> list[Any]:
        for candidate in (f"\\boxed{{{text}}}", f"${text}$", text):
            result = parse(candidate, extraction_config=configs, parsing_timeout=parse_timeout)
            if result:
                return result
        return []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        predicted, reference = str(request["predicted"]), str(request["reference"])
        gold, mine = parsed(reference), parsed(predicted)
        if not gold:
            return {"equal": None, "reason": f"math-verify cannot parse the reference {reference[:80]!r}"}
        if not mine:
            return {"equal": None, "reason": f"math-verify cannot parse the answer {predicted[:80]!r}"}
        equal = bool(verify(gold, mine, timeout_seconds=verify_timeout))
        return {"equal": equal, "reason": f"math-verify: {mine[0]!s:.60} {'==' if equal else '!='} {gold[0]!s:.60}"}

    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            reply = answer(json.loads(line))
        except Exception as exc:  # noqa: BLE001 - sympy raises anything; the parent needs an answer
            reply = {"equal": None, "reason": f"math-verify failed: {type(exc).__name__}: {str(exc)[:120]}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


_shared: dict[float, VerifyWorker] = {}
_shared_lock = threading.Lock()


def shared_worker(hard_timeout: float = 15.0) -> VerifyWorker:
    """The process-wide worker for a timeout (started on first use; it exits with this process)."""
    with _shared_lock:
        if hard_timeout not in _shared:
            _shared[hard_timeout] = VerifyWorker(hard_timeout=hard_timeout)
        return _shared[hard_timeout]


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
