"""`max_instances` counts the instances being created too: two creates that arrive together at a
service with room for one (each env's reset taking a second) make one instance and one 429, never
two live instances past the cap."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
from envservice_testkit import running_server


def create(url: str, task_id: str) -> httpx.Response:
    task = {"task_id": task_id, "env": "toy", "metadata": {"slow": 1.0}}  # the toy env's reset sleeps 1 s
    return httpx.post(f"{url}/create", json={"env_type": "toy", "task_id": task_id, "instance_id": None,
                                             "messages": {}, "params": {"task": task}}, timeout=30)


def test_creates_in_flight_count_against_the_cap() -> None:
    with running_server(max_instances=1) as served, ThreadPoolExecutor(2) as threads:
        replies = list(threads.map(lambda task_id: create(served.url, task_id), ["a", "b"]))
        assert sorted(reply.status_code for reply in replies) == [200, 429]
        full = next(reply for reply in replies if reply.status_code == 429).json()
        assert full["code"] == "too_many_instances" and full["retryable"] is True
        stats = httpx.get(f"{served.url}/stats", timeout=10).json()["data"]
        assert stats["peak_live"] == 1 and stats["rejected_full"] == 1
