"""`explore.executor: ray`: explorations on Ray actors, across the machines of a Ray cluster.

Each actor rebuilds the explorer, summarizer, env opener and LLM from the resolved spec with
the plugins installed where it runs (components never travel as pickles), then serves
explorations concurrently (an async actor). The driver keeps the work queue, the filters and
the cache, so checkpointing and dedup across the whole set work as they do in-process.
Actors ask for a fraction of a CPU (`explore.ray_num_cpus`): explorations mostly wait on the
LLM and the env. Ray is imported only when this executor is selected.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from beyondagent_core.errors import RunError
from beyondagent_core.logs import get_logger
from beyondagent_core.types import Task

log = get_logger(__name__)


class ExplorationActor:
    """Runs explorations for one driver; one per Ray actor."""

    def __init__(self, spec_data: dict[str, Any], spec_path: str | None, switches: dict[str, Any], run_dir: str):
        from beyondagent_core.context import RunContext, RunInfo
        from beyondagent_core.exploration.executor import LocalExecutor
        from beyondagent_core.plugins import PluginManager, Switches
        from beyondagent_core.registry import Registry
        from beyondagent_core.spec import parse_spec, validate_spec

        manager = PluginManager(Switches(autoload=switches["autoload"], allow=set(switches["allow"]),
                                         deny=set(switches["deny"]))).load()
        path = Path(spec_path) if spec_path else None
        spec = validate_spec(parse_spec(spec_data, path=path), Registry(manager))
        info = RunInfo(name=spec.run.name, run_dir=Path(run_dir), seed=spec.run.seed, spec={})
        self.run = RunContext(spec=spec, info=info, manager=manager)
        self.executor = LocalExecutor(self.run.build("explore"), self.run.build("explore.summarizer"),
                                      self.run.env_factory(), self.run.chat_llm(), describe=self.run.describe)

    async def explore(self, seed: dict[str, Any], known: list[dict[str, Any]], index: int) -> list[dict[str, Any]]:
        candidates = await self.executor.explore(Task.from_dict(seed), [Task.from_dict(t) for t in known], index)
        return [task.to_dict() for task in candidates]

    async def tallies(self) -> tuple[dict[str, int], dict[str, int]]:
        return await self.executor.tallies()

    def where(self) -> dict[str, Any]:
        """The process and node the actor runs in (logged by the driver)."""
        return {"pid": os.getpid(), "node": socket.gethostname()}

    async def shutdown(self) -> None:
        await self.run.aclose()


class RayExecutor:
    """Spreads explorations over `actors` Ray actors, `ceil(workers / actors)` at a time each."""

    def __init__(self, *, spec_data: dict[str, Any], spec_path: str | None, switches: dict[str, Any],
                 run_dir: str, workers: int, actors: int, num_cpus: float, address: str | None = None):
        try:
            import ray
        except ImportError as exc:
            raise RunError("explore.executor is 'ray' but ray is not installed",
                           where="explore.executor", hint="pip install 'beyondagent[ray]'") from exc
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        count = max(1, min(actors, workers))
        actor_cls = ray.remote(num_cpus=num_cpus, max_concurrency=math.ceil(workers / count))(ExplorationActor)
        self.actors = [actor_cls.remote(spec_data, spec_path, switches, run_dir) for _ in range(count)]
        self._in_flight = [0] * count
        log.info("explore.ray_actors", actors=ray.get([actor.where.remote() for actor in self.actors]),
                 workers=workers, num_cpus=num_cpus)

    async def explore(self, seed: Task, known: Sequence[Task], index: int) -> list[Task]:
        slot = min(range(len(self.actors)), key=self._in_flight.__getitem__)  # the least busy actor
        self._in_flight[slot] += 1
        try:
            candidates = await self.actors[slot].explore.remote(seed.to_dict(), [task.to_dict() for task in known],
                                                             index)
        finally:
            self._in_flight[slot] -= 1
        return [Task.from_dict(task) for task in candidates]

    async def tallies(self) -> tuple[dict[str, int], dict[str, int]]:
        llm: dict[str, int] = {}
        summarizer: dict[str, int] = {}
        for actor in self.actors:
            usage, stats = await actor.tallies.remote()
            for total, part in ((llm, usage), (summarizer, stats)):
                for key, value in part.items():
                    total[key] = total.get(key, 0) + value
        return llm, summarizer

    async def aclose(self) -> None:
        for actor in self.actors:
            try:
                await actor.shutdown.remote()
            finally:
                self._ray.kill(actor)
        self.actors = []
