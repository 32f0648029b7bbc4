"""The exploration stage: seed tasks x `n` explorations -> filtered synthetic tasks, cached.

A work queue of `(seed, i)` jobs is drained by `workers` concurrent asyncio workers, with no
batch barriers, so a slow exploration never holds up the others. Each exploration runs on an
executor (`executor.py`: in this process; `ray_executor.py`: on Ray actors), which runs the
explorer in a fresh env and asks the summarizer for candidate tasks (showing it the tasks
already found for that seed). The filters then run in order here, and what survives is
appended to the cache at once, with a checkpoint line, so a killed exploration resumes where
it stopped (`checkpoint.py`). A failing exploration is counted and logged; the rest go on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from beyondagent_core.envs.local import as_opener
from beyondagent_core.exploration.checkpoint import Checkpoint, fingerprint
from beyondagent_core.exploration.executor import Executor, LocalExecutor
from beyondagent_core.failures import FailureTally
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import ChatLLM, Explorer, Summarizer, TaskFilter
from beyondagent_core.types import Task

log = get_logger(__name__)

MAX_ERRORS_KEPT = 5


@attrs.define
class ExploreResult:
    """What the stage produced: every kept task (also in the cache) and its tallies.

    `resumed` counts explorations a previous, interrupted run had already done, `completed`
    those done this time (`failures` those that failed); `llm` sums
    the LLM usage (calls, retries, failures, tokens) and `summarizer` the summarizer's own
    counters (e.g. malformed `<task>` blocks) of the explorations run this time.
    """

    tasks: list[Task] = attrs.field(factory=list)
    explorations: int = 0
    resumed: int = 0
    completed: int = 0
    failures: int = 0
    candidates: int = 0
    errors: list[str] = attrs.field(factory=list)
    failed: FailureTally = attrs.field(factory=FailureTally)  # every failure, grouped by cause
    per_seed: dict[str, int] = attrs.field(factory=dict)
    dropped_by_filter: dict[str, int] = attrs.field(factory=dict)
    llm: dict[str, int] = attrs.field(factory=dict)
    summarizer: dict[str, int] = attrs.field(factory=dict)
    seconds: float = 0.0


@attrs.define
class _Stage:
    """One run of the stage: its executor, filters, checkpoint and the state workers share."""

    executor: Executor
    filters: Sequence[tuple[str, TaskFilter]]
    checkpoint: Checkpoint
    result: ExploreResult
    known: dict[str, list[Task]]
    used_ids: set[str]
    progress: Any = None
    # Filters that compare with other tasks (dedup) and the cache append run under this lock,
    # so cross-set dedup and the checkpoint's order hold while explorations overlap.
    commit_lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    # Each job's candidates that passed the filters so far, while its later filters run.
    in_flight: dict[str, list[Task]] = attrs.field(factory=dict)

    async def worker(self, jobs: Iterator[tuple[Task, int]]) -> None:
        for seed, i in jobs:
            try:
                candidates = await self.executor.explore(seed, list(self.known[seed.task_id]), i)
                await self.commit(seed, i, candidates)
                self.result.completed += 1
            except Exception as exc:  # one failed exploration must not stop the others
                self.record_failure(seed, i, exc)
            if self.progress is not None:
                self.progress(self.result)

    async def commit(self, seed: Task, i: int, candidates: Sequence[Task]) -> None:
        """Filter one exploration's candidates in order, then append the survivors to the cache.

        A filter marked `independent` (its verdict on a task needs no other task, e.g. a
        feasibility re-run) runs outside the commit lock, so a slow one holds up nobody; the
        others (dedup) run under it and see every task kept or still in flight elsewhere.
        """
        job = job_key(seed, i)
        self.result.candidates += len(candidates)
        tasks = [self.as_synthetic(seed, task) for task in candidates]
        try:
            for name, task_filter in self.filters:
                before = len(tasks)
                if getattr(task_filter, "independent", False):
                    tasks = list(await task_filter.keep(tasks, []))
                    if job in self.in_flight:
                        self.in_flight[job] = tasks
                else:
                    async with self.commit_lock:
                        others = [task for other, pending in self.in_flight.items() if other != job
                                  for task in pending]
                        tasks = list(await task_filter.keep(tasks, [*self.result.tasks, *others]))
                        # Others' dedup now sees these (they passed a comparing filter).
                        self.in_flight[job] = tasks
                self.result.dropped_by_filter[name] += before - len(tasks)
            async with self.commit_lock:
                self.checkpoint.record(job, tasks)
                self.result.tasks.extend(tasks)
                self.known[seed.task_id].extend(tasks)
                self.result.per_seed[seed.task_id] += len(tasks)
        finally:
            self.in_flight.pop(job, None)

    def as_synthetic(self, seed: Task, task: Task) -> Task:
        """Mark a candidate as synthetic from `seed`, renaming it if its id is taken."""
        task_id = task.task_id
        k = 0
        while task_id in self.used_ids:
            task_id = f"{seed.task_id}/syn-{k}"
            k += 1
        self.used_ids.add(task_id)  # reserved at once; a dropped candidate's id just stays unused
        return attrs.evolve(task, task_id=task_id, origin="synthetic", seed_task_id=seed.task_id,
                            env=task.env or seed.env)

    def record_failure(self, seed: Task, i: int, exc: Exception) -> None:
        cause = f"{type(exc).__name__}: {_first_line(exc)}"
        message = f"{job_key(seed, i)}: {cause}"
        self.result.failures += 1
        self.result.failed.add(job_key(seed, i), cause)
        if len(self.result.errors) < MAX_ERRORS_KEPT:
            self.result.errors.append(message)
        log.warning("explore.failed", seed=seed.task_id, exploration=i, error=message)


def job_key(seed: Task, i: int) -> str:
    return f"{seed.task_id}#{i}"


async def explore_seeds(
    seeds: Sequence[Task],
    *,
    n: int,
    workers: int,
    filters: Sequence[tuple[str, TaskFilter]],
    cache_path: Path,
    explorer: Explorer | None = None,
    summarizer: Summarizer | None = None,
    make_env: Any = None,
    llm: ChatLLM | None = None,
    executor: Executor | None = None,
    settings: dict[str, Any] | None = None,
    force: bool = False,
    progress: Any = None,
) -> ExploreResult:
    """Explore each seed `n` times with `workers` concurrent explorations.

    Explorations run on `executor`, or in this process with `explorer`, `summarizer`, the
    envs of `make_env` (an `EnvOpener`, or a function returning a sync `Env`) and `llm`. Kept
    tasks are appended to `cache_path` as each exploration finishes. A cache checkpointed for
    the same seeds and `settings` is resumed (its finished explorations are not redone); one
    for other seeds or settings is refused unless `force`. `progress(result)` is called after
    each exploration.
    """
    if n < 0 or workers < 1:
        raise ValueError(f"need n >= 0 and workers >= 1, got n={n}, workers={workers}")
    if executor is None:
        if explorer is None or summarizer is None or make_env is None:
            raise ValueError("give an executor, or explorer, summarizer and make_env")
        executor = LocalExecutor(explorer, summarizer, as_opener(make_env), llm)
    cache_path = Path(cache_path)
    key_settings = {"n": n, **(settings or {})}
    checkpoint = Checkpoint.open(cache_path, fingerprint(seeds, key_settings), force=force, seeds=seeds,
                                 settings=key_settings)
    seed_ids = {seed.task_id for seed in seeds}
    result = ExploreResult(
        tasks=list(checkpoint.tasks),
        explorations=len(seeds) * n,
        per_seed={seed.task_id: 0 for seed in seeds},
        dropped_by_filter={name: 0 for name, _ in filters},
    )
    known: dict[str, list[Task]] = {seed.task_id: [] for seed in seeds}
    for task in checkpoint.tasks:
        if task.seed_task_id in seed_ids:
            known[task.seed_task_id].append(task)
            result.per_seed[task.seed_task_id] += 1
    stage = _Stage(
        executor=executor, filters=filters, checkpoint=checkpoint, result=result, known=known,
        used_ids=seed_ids | {task.task_id for task in checkpoint.tasks}, progress=progress,
    )
    # Round-major order: a seed's explorations are spread out, so later ones see more "known".
    todo = [(seed, i) for i in range(n) for seed in seeds if job_key(seed, i) not in checkpoint.done]
    result.resumed = result.explorations - len(todo)
    started = time.perf_counter()
    log.info("explore.started", seeds=len(seeds), n=n, workers=workers, cache=str(cache_path),
             resumed=result.resumed, todo=len(todo))
    jobs = iter(todo)
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(workers, len(todo))):
                group.create_task(stage.worker(jobs))
        result.llm, result.summarizer = await executor.tallies()
    finally:
        await executor.aclose()
    if result.failures:  # a failed exploration never marks the cache finished: a later run retries it
        log.warning("explore.unfinished", failures=result.failures, cache=str(cache_path))
    else:
        checkpoint.finish()
    result.seconds = time.perf_counter() - started
    log.info("explore.finished", tasks=len(result.tasks), explorations=result.explorations, resumed=result.resumed,
             failures=result.failures, dropped_by_filter=result.dropped_by_filter, llm=result.llm,
             seconds=round(result.seconds, 3))
    return result


def run_exploration(seeds: Sequence[Task], **options: Any) -> ExploreResult:
    """`explore_seeds` for sync callers (runs its own event loop); same keyword options."""
    return asyncio.run(explore_seeds(seeds, **options))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"
