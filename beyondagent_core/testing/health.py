"""`HealthPoller`: a service's `/healthz` polled on a thread while a test does something hostile to it,
so the test can assert the service kept answering (an env service, a gateway: `max(latencies) < 1`)."""

from __future__ import annotations

import math
import threading
import time

import httpx


class HealthPoller:
    """Polls `<url>/healthz` every `every` seconds while in a `with` block; `latencies` in seconds
    (inf: no answer within 2 s, or an error status)."""

    def __init__(self, url: str, *, every: float = 0.02):
        self.url, self.every, self.latencies = url, every, []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True, name="tests-healthz")

    def _poll(self) -> None:
        with httpx.Client(timeout=2.0) as http:
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    http.get(f"{self.url}/healthz").raise_for_status()
                    self.latencies.append(time.monotonic() - started)
                except httpx.HTTPError:
                    self.latencies.append(math.inf)
                self.stopping.wait(self.every)

    def __enter__(self) -> HealthPoller:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
