"""What the AppWorld tests share beyond fixtures (a uniquely named module: `conftest` names clash
across the suites `scripts/test.sh` runs together)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any


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


