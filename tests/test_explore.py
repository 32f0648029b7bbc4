"""The exploration stage on a real (tiny) env, with a scripted explorer and no LLM.

The env is a number line; the explorer takes a fixed list of moves; the hindsight summarizer
turns the position reached into "reach position k"; the filters are real ones.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from beyondagent_core.errors import RunError
from beyondagent_core.exploration.engine import explore_seeds, run_exploration
from beyondagent_core.jsonl import read_tasks
from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.types import Reward, Task, Trajectory, Turn

SEEDS = [Task(task_id=f"seed-{start}", query=f"Reach {start + 5}.", metadata={"start": start}) for start in (0, 10, 20)]


class NumberLine:
    """Starts at the seed's `metadata["start"]`; "right"/"left" move by one."""

    created: list[NumberLine] = []

    def __init__(self) -> None:
        self.position = 0
        self.closed = False
        NumberLine.created.append(self)

    def reset(self, task: Task) -> EnvReset:
        self.position = task.metadata.get("start", 0)
        return EnvReset(messages=[{"role": "user", "content": f"position {self.position}"}])

    def step(self, action: dict) -> EnvStep:
        self.position += {"right": 1, "left": -1}.get(action["content"], 0)
        return EnvStep(observation=[{"role": "user", "content": f"position {self.position}"}])

    def evaluate(self) -> Reward:
        return Reward(score=0.0)

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def fresh_env_log():
    NumberLine.created = []


class ScriptedExplorer:
    """Plays `moves` from the seed's initial state; optional delay and per-seed failure."""

    def __init__(self, moves=("right", "right", "left"), sleep: dict[str, float] | None = None, fail_on: str | None = None):
        self.moves = moves
        self.sleep = sleep or {}
        self.fail_on = fail_on
        self.active = 0
        self.max_active = 0

    async def explore(self, seed: Task, env, llm) -> Trajectory:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            first = await env.reset(seed)
            turns = [Turn(role="user", content=first.messages[0]["content"])]
            await asyncio.sleep(self.sleep.get(seed.task_id, 0.0))
            if seed.task_id == self.fail_on:
                raise ValueError(f"cannot explore {seed.task_id}\nsecond line")
            for move in self.moves:
                step = await env.step({"role": "assistant", "content": move})
                turns += [Turn(role="assistant", content=move), Turn(role="user", content=step.observation[0]["content"])]
            return Trajectory(task=seed, turns=turns)
        finally:
            self.active -= 1


class Hindsight:
    """Proposes "reach position k" for the position reached (twice: a duplicate to drop),
    plus one low-confidence guess. Ids collide on purpose; origin is left wrong on purpose."""

    def __init__(self) -> None:
        self.known_seen: dict[str, list[int]] = {}

    async def summarize(self, seed: Task, trajectory: Trajectory, known: Sequence[Task], llm) -> list[Task]:
        self.known_seen.setdefault(seed.task_id, []).append(len(known))
        reached = int(trajectory.turns[-1].content.split()[-1])
        sure = Task(task_id="syn", query=f"reach position {reached}", ground_truth=reached, confidence=0.9)
        guess = Task(task_id=seed.task_id, query="reach position 1000", confidence=0.1)
        return [sure, sure, guess]


class MinConfidence:
    async def keep(self, candidates: Sequence[Task], kept: Sequence[Task]) -> list[Task]:
        return [t for t in candidates if (t.confidence or 0.0) >= 0.5]


class DedupByQuery:
    async def keep(self, candidates: Sequence[Task], kept: Sequence[Task]) -> list[Task]:
        seen = {t.query for t in kept}
        out = []
        for task in candidates:
            if task.query not in seen:
                seen.add(task.query)
                out.append(task)
        return out


FILTERS = [("min_confidence", MinConfidence()), ("dedup", DedupByQuery())]


def explore(tmp_path: Path, *, seeds=SEEDS, n=3, workers=4, explorer=None, summarizer=None):
    return asyncio.run(
        explore_seeds(
            seeds,
            n=n,
            workers=workers,
            explorer=explorer or ScriptedExplorer(),
            summarizer=summarizer or Hindsight(),
            filters=FILTERS,
            make_env=NumberLine,
            cache_path=tmp_path / "synthetic.jsonl",
        )
    )


def test_explores_filters_and_caches(tmp_path: Path) -> None:
    result = explore(tmp_path)

    assert result.explorations == len(SEEDS) * 3
    assert result.failures == 0 and result.errors == []
    assert read_tasks(tmp_path / "synthetic.jsonl") == result.tasks
    assert sorted(t.query for t in result.tasks) == ["reach position 1", "reach position 11", "reach position 21"]
    for task in result.tasks:
        assert task.origin == "synthetic"
        assert task.seed_task_id == f"seed-{task.ground_truth - 1}"
    ids = [t.task_id for t in result.tasks]
    assert len(set(ids)) == len(ids) and not set(ids) & {s.task_id for s in SEEDS}
    assert result.per_seed == {"seed-0": 1, "seed-10": 1, "seed-20": 1}
    # 9 explorations x 3 candidates: 9 guesses unsure; per seed, 6 sure ones of which 1 kept.
    assert result.dropped_by_filter == {"min_confidence": 9, "dedup": 15}
    assert len(NumberLine.created) == 9 and all(env.closed for env in NumberLine.created)


def test_summarizer_sees_tasks_known_for_its_seed(tmp_path: Path) -> None:
    summarizer = Hindsight()
    explore(tmp_path, workers=1, summarizer=summarizer)
    assert summarizer.known_seen == {seed.task_id: [0, 1, 1] for seed in SEEDS}


def test_failing_exploration_is_counted_and_others_complete(tmp_path: Path) -> None:
    result = explore(tmp_path, explorer=ScriptedExplorer(fail_on="seed-10"))

    assert result.explorations == 9
    assert result.failures == 3
    assert len(result.errors) == 3
    assert all(e.startswith("seed-10#") and e.endswith("ValueError: cannot explore seed-10") for e in result.errors)
    assert result.per_seed == {"seed-0": 1, "seed-10": 0, "seed-20": 1}
    assert read_tasks(tmp_path / "synthetic.jsonl") == result.tasks
    assert all(env.closed for env in NumberLine.created)


def test_explorations_overlap(tmp_path: Path) -> None:
    seeds = SEEDS[:2]
    explorer = ScriptedExplorer(sleep={s.task_id: 0.2 for s in seeds})
    result = explore(tmp_path, seeds=seeds, n=4, workers=4, explorer=explorer)

    assert result.explorations == 8 and result.failures == 0
    assert explorer.max_active == 4


def test_slow_exploration_holds_up_nobody(tmp_path: Path) -> None:
    seeds = [Task(task_id="slow", metadata={"start": 100})] + SEEDS
    explorer = ScriptedExplorer(sleep={"slow": 0.8} | {s.task_id: 0.05 for s in SEEDS})
    result = explore(tmp_path, seeds=seeds, n=1, workers=2, explorer=explorer)

    cached = read_tasks(tmp_path / "synthetic.jsonl")
    assert [t.seed_task_id for t in cached] == ["seed-0", "seed-10", "seed-20", "slow"]
    assert cached == result.tasks


def test_sync_wrapper_and_existing_cache(tmp_path: Path) -> None:
    cache = tmp_path / "out" / "synthetic.jsonl"
    kwargs = dict(
        n=1, workers=2, explorer=ScriptedExplorer(), summarizer=Hindsight(),
        filters=FILTERS, make_env=NumberLine, cache_path=cache,
    )
    result = run_exploration(SEEDS, **kwargs)
    assert len(result.tasks) == 3 and read_tasks(cache) == result.tasks
    again = run_exploration(SEEDS, **kwargs)  # a finished cache: nothing is explored again
    assert again.resumed == 3 and again.tasks == result.tasks and read_tasks(cache) == result.tasks
    with pytest.raises(RunError, match="another seed set"):
        run_exploration(SEEDS[:2], **kwargs)
    fresh = run_exploration(SEEDS[:2], **kwargs, force=True)
    assert fresh.resumed == 0 and len(read_tasks(cache)) == 2


def test_a_task_file_of_the_users_is_not_overwritten(tmp_path: Path) -> None:
    cache = tmp_path / "mine.jsonl"
    cache.write_text('{"task_id": "mine"}\n')
    with pytest.raises(RunError, match="no exploration checkpoint"):
        explore_to(cache)
    assert cache.read_text() == '{"task_id": "mine"}\n'


def explore_to(cache: Path, **options):
    return run_exploration(SEEDS, n=1, workers=2, explorer=ScriptedExplorer(), summarizer=Hindsight(),
                           filters=FILTERS, make_env=NumberLine, cache_path=cache, **options)


def test_no_explorations_leaves_an_empty_cache(tmp_path: Path) -> None:
    result = explore(tmp_path, n=0)
    assert result.explorations == 0 and result.tasks == []
    assert (tmp_path / "synthetic.jsonl").read_text() == ""


class SlowIndependent:
    """A filter that takes its time and needs no other task (like a feasibility re-run)."""

    independent = True

    def __init__(self) -> None:
        self.active = 0
        self.max_active = 0

    async def keep(self, candidates: Sequence[Task], kept: Sequence[Task]) -> list[Task]:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        await asyncio.sleep(0.1)
        self.active -= 1
        return list(candidates)


def test_an_independent_filter_runs_outside_the_commit_lock(tmp_path: Path) -> None:
    slow = SlowIndependent()
    result = asyncio.run(explore_seeds(
        SEEDS, n=2, workers=4, explorer=ScriptedExplorer(), summarizer=Hindsight(),
        filters=[("slow", slow), *FILTERS], make_env=NumberLine, cache_path=tmp_path / "c.jsonl"))
    assert slow.max_active > 1  # several explorations were in the slow filter at once
    # ...and dedup, under the lock, still saw the others' tasks: one task per seed.
    assert result.per_seed == {"seed-0": 1, "seed-10": 1, "seed-20": 1}
    assert read_tasks(tmp_path / "c.jsonl") == result.tasks


def test_a_failed_exploration_leaves_the_cache_unfinished_and_is_retried(tmp_path: Path) -> None:
    from beyondagent_core.exploration.checkpoint import is_finished

    first = explore(tmp_path, explorer=ScriptedExplorer(fail_on="seed-10"))
    assert first.failures == 3 and is_finished(tmp_path / "synthetic.jsonl") is False
    assert first.failed.summary() == "3 x ValueError: cannot explore seed-10 (first: seed-10#0)"
    again = explore(tmp_path)
    assert again.resumed == 6 and again.completed == 3 and again.failures == 0
    assert is_finished(tmp_path / "synthetic.jsonl") is True


def test_a_torn_checkpoint_line_is_cut_so_later_lines_count(tmp_path: Path) -> None:
    from beyondagent_core.exploration.checkpoint import checkpoint_path, is_finished

    explore(tmp_path)
    state = checkpoint_path(tmp_path / "synthetic.jsonl")
    lines = state.read_text().splitlines(keepends=True)
    assert '"finished"' in lines[-1]
    state.write_text("".join(lines[:-2]) + lines[-2][:9])  # killed while writing the last job's line
    again = explore(tmp_path)
    assert again.resumed == 8 and again.completed == 1  # the torn job is redone, nothing else
    text = state.read_text()
    assert text.endswith("\n") and all(line.startswith("{") and line.endswith("}") for line in text.splitlines())
    assert is_finished(tmp_path / "synthetic.jsonl") is True


def test_a_changed_cache_key_says_what_changed(tmp_path: Path) -> None:
    from beyondagent_core.exploration.checkpoint import Checkpoint, check_fingerprint, fingerprint

    cache = tmp_path / "syn.jsonl"
    then = {"n": 2, "explore": {"name": "walker"}}
    Checkpoint.open(cache, fingerprint(SEEDS, then), seeds=SEEDS, settings=then)
    now = {"n": 2, "explore": {"name": "walker", "window": 4}}  # the plugin's config gained `window`
    with pytest.raises(RunError) as caught:
        check_fingerprint(cache, fingerprint(SEEDS[:2], now), seeds=SEEDS[:2], settings=now)
    message = caught.value.message
    assert "the seed tasks differ (3 then, 2 now)" in message
    assert "explore.window is new (set to 4 now; a plugin's config may have gained this key)" in message
