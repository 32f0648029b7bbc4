"""The env service's instance pool exactly at its limits, on a clock the test sets (no server, no sleeps).

Written after the eighth audit, for the next audit's mutants in `instances.py`:

- the idle TTL: an instance idle exactly `ttl` seconds is reaped, one idle a hair less is kept; each call
  (and a retried create) restarts its idle time; the reaper closes what it forgets;
- the cap: with `max_instances - 1` live a create succeeds, with `max_instances` live it is a 429 naming
  the cap (counted in `rejected_full`), and a release makes room again;
- `PoolLimits` refuses a zero TTL, cap or call timeout, naming the key, and takes the least legal values;
- `release` is idempotent (True, then False), closes the env, and a release without an id is a 400;
- a retried create (same id, same task, no call yet) returns the same reply without a second env; the
  same id for another task, or after a call, is a 409;
- an env whose `close()` raises is still forgotten, the failure counted as an env error;
- `stats()` reports the configured limits, not the defaults.

`ToyEnv` (envservice_testkit) is the env, run by the real `ThreadHost`.
"""

from __future__ import annotations

import asyncio

import pytest
from envservice_testkit import ToyEnv
from test_envservice_server import ACTION

from beyondagent_plugin_envservice.instances import InstancePool, PoolLimits, ThreadHost
from beyondagent_plugin_envservice.protocol import ServiceError
from beyondagent_core.types import Task


class Counted(ToyEnv):
    """A toy env remembering every instance built; `broken_close` makes its close raise."""

    built: list[Counted] = []

    def __init__(self) -> None:
        super().__init__()
        Counted.built.append(self)

    def close(self) -> None:
        super().close()
        if self.task is not None and self.task.metadata.get("broken_close"):
            raise OSError("close failed")


def pool_of(*, ttl: float = 10.0, max_instances: int = 4,
            call_timeout: float = 10.0) -> tuple[InstancePool, list[float]]:
    Counted.built.clear()
    now = [0.0]
    limits = PoolLimits(ttl=ttl, max_instances=max_instances, call_timeout=call_timeout)
    return InstancePool(ThreadHost(Counted, threads=2), limits, env_name="toy", clock=lambda: now[0]), now


def test_an_instance_idle_exactly_the_ttl_is_reaped_and_a_hair_less_is_kept() -> None:
    pool, now = pool_of(ttl=10.0)

    async def main() -> list[int]:
        await pool.create(Task("a"), "a")
        now[0] = 9.999
        kept = await pool.reap_idle()
        now[0] = 10.0
        reaped = await pool.reap_idle()
        return [kept, reaped]

    assert asyncio.run(main()) == [0, 1]
    assert pool.instances == {} and pool.counts["reaped"] == 1 and Counted.built[0].closed


def test_each_call_and_a_retried_create_restart_the_idle_time() -> None:
    pool, now = pool_of(ttl=10.0)

    async def main() -> list[int]:
        first = await pool.create(Task("a"), "a")
        now[0] = 6.0
        assert await pool.create(Task("a"), "a") is first  # the retried create: idle from 6
        now[0] = 12.0
        kept_after_retry = await pool.reap_idle()
        await pool.call("a", "step", ACTION)  # idle from 12
        now[0] = 21.9
        kept_after_call = await pool.reap_idle()
        now[0] = 22.0
        return [kept_after_retry, kept_after_call, await pool.reap_idle()]

    assert asyncio.run(main()) == [0, 0, 1]
    assert len(Counted.built) == 1  # the retried create built no second env


def test_the_cap_admits_one_below_it_refuses_at_it_and_a_release_makes_room() -> None:
    pool, _ = pool_of(max_instances=2)

    async def main() -> None:
        await pool.create(Task("a"), "a")
        await pool.create(Task("b"), "b")  # one live below the cap: admitted
        with pytest.raises(ServiceError) as full:
            await pool.create(Task("c"), "c")
        assert (full.value.status, full.value.code, full.value.retryable) == (429, "too_many_instances", True)
        assert "the service is full: 2 live instances (max_instances=2)" in full.value.message
        assert await pool.release("a") is True
        await pool.create(Task("c"), "c")
        await pool.release("b")
        await pool.release("c")
        await pool.create(Task("d"), "d")  # one live now: the peak stays 2

    asyncio.run(main())
    assert pool.counts["rejected_full"] == 1 and pool.peak_live == 2 and len(Counted.built) == 4


@pytest.mark.parametrize(("key", "bad", "least"), [
    ("ttl", 0.0, 0.001),
    ("max_instances", 0, 1),
    ("call_timeout", 0.0, 0.001),
])
def test_pool_limits_refuse_zero_naming_the_key_and_take_the_least_legal_value(key: str, bad, least) -> None:
    with pytest.raises(ValueError, match=f"^{key} must be"):
        PoolLimits(**{key: bad})
    assert getattr(PoolLimits(**{key: least}), key) == least
    assert attrs_defaults() == {"ttl": 600.0, "max_instances": 256, "call_timeout": 60.0, "open_timeout": 120.0}


def attrs_defaults() -> dict:
    limits = PoolLimits()
    return {"ttl": limits.ttl, "max_instances": limits.max_instances, "call_timeout": limits.call_timeout,
            "open_timeout": limits.open_timeout}


def test_release_closes_the_env_once_and_is_idempotent() -> None:
    pool, _ = pool_of()

    async def main() -> list:
        await pool.create(Task("a"), "a")
        answers = [await pool.release("a"), await pool.release("a"), await pool.release("never")]
        with pytest.raises(ServiceError) as missing:
            await pool.release("")
        assert (missing.value.status, missing.value.message) == (400, "instance_id is required")
        with pytest.raises(ServiceError) as gone:
            await pool.call("a", "step", ACTION)
        assert gone.value.status == 404 and "unknown instance 'a'" in gone.value.message
        return answers

    assert asyncio.run(main()) == [True, False, False]
    assert Counted.built[0].close_calls == 1 and pool.counts["released"] == 1


def test_an_instance_id_is_reused_only_by_the_same_create_before_any_call() -> None:
    pool, _ = pool_of()

    async def main() -> None:
        await pool.create(Task("a"), "x")
        with pytest.raises(ServiceError, match="instance 'x' already exists") as other_task:
            await pool.create(Task("b"), "x")
        assert other_task.value.status == 409
        await pool.call("x", "step", ACTION)
        with pytest.raises(ServiceError, match="already exists"):
            await pool.create(Task("a"), "x")  # the same create after a call: not a retry any more

    asyncio.run(main())
    assert len(Counted.built) == 1 and pool.counts["created"] == 1


def test_an_env_whose_close_fails_is_still_forgotten_and_the_failure_counted() -> None:
    pool, now = pool_of(ttl=5.0)

    async def main() -> None:
        await pool.create(Task("a", metadata={"broken_close": True}), "a")
        await pool.create(Task("b", metadata={"broken_close": True}), "b")
        assert await pool.release("a") is True
        now[0] = 5.0
        assert await pool.reap_idle() == 1

    asyncio.run(main())
    assert pool.instances == {} and pool.counts["env_errors"] == 2
    assert [env.close_calls for env in Counted.built] == [1, 1]


def test_stats_report_the_configured_limits() -> None:
    pool, _ = pool_of(ttl=7.5, max_instances=3, call_timeout=2.5)
    stats = pool.stats()
    assert (stats["ttl_s"], stats["max_instances"], stats["call_timeout_s"]) == (7.5, 3, 2.5)
    assert (stats["env"], stats["instances"], stats["live"], stats["creating"]) == ("toy", "thread", 0, 0)
