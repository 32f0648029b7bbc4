"""What the AppWorld tests share beyond fixtures (a uniquely named module: `conftest` names clash
across the suites `scripts/test.sh` runs together)."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from typing import Any

import httpx

# Short enough that the hung-cell test is quick, long enough for a reset on a busy 2-core machine.
CALL_TIMEOUT = 20
# AppWorld's own cell timeout on the test server (the env's `code_timeout`): short, so the test of a
# cell that runs too long is quick; the tests' other cells take well under a second.
CODE_TIMEOUT = 5


class LoopThread:
    """One event loop on a thread, so synchronous code (the env contract suite) can use the async client."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="appworld-tests-loop")
        self.thread.start()

    def run(self, coroutine: Any, timeout: float = 300) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class HealthPoller:
    """Polls a service's `/healthz` on a thread while in a `with` block; `latencies` in seconds (inf: none in 2 s)."""

    def __init__(self, url: str):
        self.url, self.latencies = url, []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True, name="appworld-tests-healthz")

    def _poll(self) -> None:
        with httpx.Client(timeout=2.0) as http:
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    http.get(f"{self.url}/healthz").raise_for_status()
                    self.latencies.append(time.monotonic() - started)
                except httpx.HTTPError:
                    self.latencies.append(math.inf)
                self.stopping.wait(0.05)

    def __enter__(self) -> HealthPoller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
