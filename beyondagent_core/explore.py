"""The exploration stage: seed tasks x `n` explorations -> filtered synthetic tasks, cached.

A work queue of `(seed, i)` jobs is drained by `workers` concurrent asyncio workers, with no
batch barriers, so a slow exploration never holds up the others. Each exploration runs the
explorer in a fresh env, asks the summarizer for candidate tasks (showing it the tasks
already found for that seed), runs the filters in order and appends what survives to the
JSON-lines cache at once. A failing exploration is counted and logged; the rest go on.
"""

# The simple in-process engine; a Ray executor, checkpoints keyed by a hash of the seed set
# and rich progress come later.

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import structlog

from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_core.jsonl import append_jsonl
from beyondagent_core.protocols import ChatLLM, Env, Explorer, Summarizer, TaskFilter
from beyondagent_core.types import Task

log = structlog.get_logger(__name__)

MAX_ERRORS_KEPT = 5


@attrs.define
class ExploreResult:
    """What the stage produced: the kept tasks (also in the cache) and its tallies."""

    tasks: list[Task] = attrs.field(factory=list)
    explorations: int = 0
    failures: int = 0
    errors: list[str] = attrs.field(factory=list)
    per_seed: dict[str, int] = attrs.field(factory=dict)
    dropped_by_filter: dict[str, int] = attrs.field(factory=dict)
    seconds: float = 0.0


@attrs.define
class _Stage:
    """One run of the stage: its components and the state the workers share."""

    explorer: Explorer
    summarizer: Summarizer
    filters: Sequence[tuple[str, TaskFilter]]
    make_env: Callable[[], Env]
    cache_path: Path
    llm: ChatLLM | None
    result: ExploreResult
    known: dict[str, list[Task]]
    used_ids: set[str]
    # Naming, filtering and appending one exploration's candidates happen under this lock,
    # so cross-set dedup and unique task ids hold while explorations overlap.
    commit_lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)

    async def worker(self, jobs: Iterator[tuple[Task, int]]) -> None:
        for seed, i in jobs:
            try:
                await self.explore_one(seed)
            except Exception as exc:  # one failed exploration must not stop the others
                self.record_failure(seed, i, exc)

    async def explore_one(self, seed: Task) -> None:
        env = await asyncio.to_thread(self.make_env)
        async with LocalAsyncEnv(env) as aenv:
            trajectory = await self.explorer.explore(seed, aenv, self.llm)
        known = list(self.known[seed.task_id])
        candidates = await self.summarizer.summarize(seed, trajectory, known, self.llm)
        _check_candidates(self.summarizer, candidates)
        async with self.commit_lock:
            await self.commit(seed, candidates)

    async def commit(self, seed: Task, candidates: Sequence[Task]) -> None:
        kept = [self.as_synthetic(seed, task) for task in candidates]
        for name, task_filter in self.filters:
            before = len(kept)
            kept = list(await task_filter.keep(kept, list(self.result.tasks)))
            self.result.dropped_by_filter[name] += before - len(kept)
        if not kept:
            return
        append_jsonl(self.cache_path, kept)
        self.result.tasks.extend(kept)
        self.known[seed.task_id].extend(kept)
        self.result.per_seed[seed.task_id] += len(kept)
        self.used_ids.update(task.task_id for task in kept)

    def as_synthetic(self, seed: Task, task: Task) -> Task:
        """Mark a candidate as synthetic from `seed`, renaming it if its id is taken."""
        task_id = task.task_id
        k = 0
        while task_id in self.used_ids:
            task_id = f"{seed.task_id}/syn-{k}"
            k += 1
        self.used_ids.add(task_id)  # reserved; a dropped candidate's id just stays unused
        return attrs.evolve(task, task_id=task_id, origin="synthetic", seed_task_id=seed.task_id)

    def record_failure(self, seed: Task, i: int, exc: Exception) -> None:
        message = f"{seed.task_id}#{i}: {type(exc).__name__}: {_first_line(exc)}"
        self.result.failures += 1
        if len(self.result.errors) < MAX_ERRORS_KEPT:
            self.result.errors.append(message)
        log.warning("explore.failed", seed=seed.task_id, exploration=i, error=message)


async def explore_seeds(
    seeds: Sequence[Task],
    *,
    n: int,
    workers: int,
    explorer: Explorer,
    summarizer: Summarizer,
    filters: Sequence[tuple[str, TaskFilter]],
    make_env: Callable[[], Env],
    cache_path: Path,
    llm: ChatLLM | None = None,
) -> ExploreResult:
    """Explore each seed `n` times with `workers` concurrent explorations.

    Kept tasks are appended to `cache_path` (created empty first; it must not already hold
    tasks) as each exploration finishes and are returned in the same order.
    """
    if n < 0 or workers < 1:
        raise ValueError(f"need n >= 0 and workers >= 1, got n={n}, workers={workers}")
    cache_path = Path(cache_path)
    _start_cache(cache_path)
    started = time.perf_counter()
    stage = _Stage(
        explorer=explorer,
        summarizer=summarizer,
        filters=filters,
        make_env=make_env,
        cache_path=cache_path,
        llm=llm,
        result=ExploreResult(
            explorations=len(seeds) * n,
            per_seed={seed.task_id: 0 for seed in seeds},
            dropped_by_filter={name: 0 for name, _ in filters},
        ),
        known={seed.task_id: [] for seed in seeds},
        used_ids={seed.task_id for seed in seeds},
    )
    log.info("explore.started", seeds=len(seeds), n=n, workers=workers, cache=str(cache_path))
    # Round-major order: a seed's explorations are spread out, so later ones see more "known".
    jobs = iter([(seed, i) for i in range(n) for seed in seeds])
    async with asyncio.TaskGroup() as group:
        for _ in range(min(workers, stage.result.explorations)):
            group.create_task(stage.worker(jobs))
    result = stage.result
    result.seconds = time.perf_counter() - started
    log.info(
        "explore.finished",
        tasks=len(result.tasks),
        explorations=result.explorations,
        failures=result.failures,
        dropped_by_filter=result.dropped_by_filter,
        seconds=round(result.seconds, 3),
    )
    return result


def run_exploration(seeds: Sequence[Task], **options: Any) -> ExploreResult:
    """`explore_seeds` for sync callers (runs its own event loop); same keyword options."""
    return asyncio.run(explore_seeds(seeds, **options))


def _start_cache(path: Path) -> None:
    if path.is_file() and path.stat().st_size > 0:
        raise FileExistsError(
            f"exploration cache {path} already holds tasks; reuse it, or delete it to explore again"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("", encoding="utf-8")


def _check_candidates(summarizer: Summarizer, candidates: object) -> None:
    if not isinstance(candidates, list) or not all(isinstance(t, Task) for t in candidates):
        raise TypeError(
            f"{type(summarizer).__name__}.summarize() must return a list of Task, got {candidates!r:.80}"
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"
