"""What the BFCL tests share beyond fixtures (a uniquely named module: `conftest` names clash
across the suites `scripts/test.sh` runs together)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any


class LoopThread:
    """One event loop on a thread, so synchronous test code can use the async env-service client."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="bfcl-tests-loop")
        self.thread.start()

    def run(self, coroutine: Any, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
