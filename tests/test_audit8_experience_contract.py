"""The experience contract's edges (`beyondagent_core.experience`), from the eighth audit.

- `ExperienceBlock`: guided and prefix-started rollouts are different rollouts of a group, so in
  `mixed` mode `ratio + prefix_ratio` may be exactly 1 (every rollout is one or the other) and
  no more; at exactly 1 the plan splits a group between the two with none left plain.
- `same_task`: a record learned on a synthetic task seeded from the scored task (or on a sibling
  of a scored synthetic task: the same seed) is that task's own record, even when its query and
  start differ, so validation never shows it; `Guidance.scoring_experiences` drops it from what a
  store returns.
"""

from __future__ import annotations

import pytest

from beyondagent_core.checks import FieldRangeError
from beyondagent_core.experience import Experience, ExperienceBlock, same_task
from beyondagent_core.runtime.guidance import Guidance
from beyondagent_core.types import Task

# --- ExperienceBlock: ratio + prefix_ratio ------------------------------------------------------


@pytest.mark.parametrize(("ratio", "prefix_ratio"), [(0.5, 0.5), (0.25, 0.75), (0.0, 1.0), (1.0, 0.0)])
def test_guided_and_prefixed_rollouts_may_fill_the_whole_group(ratio: float, prefix_ratio: float) -> None:
    block = ExperienceBlock(name="experience", mode="mixed", ratio=ratio, prefix_ratio=prefix_ratio)
    assert block.ratio + block.prefix_ratio == 1


@pytest.mark.parametrize(("ratio", "prefix_ratio"), [(0.5, 0.75), (0.75, 0.5), (1.0, 0.25)])
def test_guided_and_prefixed_rollouts_beyond_the_group_are_refused(ratio: float, prefix_ratio: float) -> None:
    with pytest.raises(FieldRangeError, match="must be <= 1 - experience.ratio") as caught:
        ExperienceBlock(name="experience", mode="mixed", ratio=ratio, prefix_ratio=prefix_ratio)
    assert caught.value.field == "prefix_ratio"


def test_the_ratio_bound_applies_to_mixed_mode_only() -> None:
    # woexp guides nobody: a prefix ratio of 1 starts every rollout from a stored success
    assert ExperienceBlock(name="experience", mode="woexp", ratio=0.75, prefix_ratio=1.0).prefix_ratio == 1.0


class Trajectories:
    """A store that keeps trajectories to replay (`examples_of`) and returns nothing to show."""

    def retrieve(self, task: Task, k: int) -> list[Experience]:
        return []

    def examples_of(self, task: Task) -> list[Experience]:
        return []


def test_a_group_split_exactly_between_guided_and_prefixed_rollouts_has_no_plain_one() -> None:
    block = ExperienceBlock(name="experience", mode="mixed", ratio=0.5, prefix_ratio=0.5)
    guided, prefixed = Guidance(block, Trajectories()).plan(4, seed=("run", 7))
    assert len(guided) == 2 and len(prefixed) == 2
    assert guided | prefixed == {0, 1, 2, 3} and not guided & prefixed


# --- same_task: records of a synthetic task and its seed ------------------------------------------


SEED = Task(task_id="lake-3", env="frozenlake", metadata={"map": ["SF", "FG"], "seed": 3})
SYNTHETIC = Task(task_id="lake-3/goal-ab12", env="frozenlake", query="Reach row 0, column 1 of this map.",
                 metadata={"map": ["SF", "FG"], "goal": {"row": 0, "col": 1}}, origin="synthetic",
                 seed_task_id="lake-3")
SIBLING = Task(task_id="lake-3/goal-cd34", env="frozenlake", query="Reach row 1, column 0 of this map.",
               metadata={"map": ["SF", "FG"], "goal": {"row": 1, "col": 0}}, origin="synthetic",
               seed_task_id="lake-3")


def learned_on_synthetic(task_id: str, seed_task_id: str) -> Experience:
    """A record learned on a synthetic task, as the store writes it (task_key of another problem)."""
    return Experience(text=f"Go right, then down ({task_id}).", task_id=task_id,
                      metadata={"task_key": "0123456789abcdef", "seed_task_id": seed_task_id})


def test_a_record_of_a_synthetic_task_is_its_seed_tasks_own_record() -> None:
    record = learned_on_synthetic("lake-3/goal-ab12", "lake-3")
    assert same_task(record, SEED)  # scoring the seed task: the synthetic task's record is its answer
    assert same_task(record, SIBLING)  # scoring a sibling: the same seed map


def test_a_record_of_another_seeds_synthetic_task_is_not_the_same_task() -> None:
    record = learned_on_synthetic("lake-9/goal-ef56", "lake-9")
    assert not same_task(record, SEED)
    assert not same_task(record, SYNTHETIC)


def test_a_record_of_the_seed_task_is_a_synthetic_tasks_own_record() -> None:
    record = Experience(text="Down, then right.", task_id="lake-3", metadata={"task_key": "fedcba9876543210"})
    assert same_task(record, SYNTHETIC)
    assert not same_task(record, Task(task_id="lake-4", env="frozenlake"))


class ReturnsEverything:
    """A store whose `retrieve` predates `exclude_own` and returns every record it holds."""

    def __init__(self, records: list[Experience]):
        self.records = records

    def retrieve(self, task: Task, k: int) -> list[Experience]:
        return self.records[:k]


def test_validation_drops_a_record_learned_on_a_synthetic_task_of_the_scored_seed() -> None:
    own = learned_on_synthetic("lake-3/goal-ab12", "lake-3")
    other = learned_on_synthetic("lake-9/goal-ef56", "lake-9")
    guidance = Guidance(ExperienceBlock(name="experience", val_mode="all", k=4), ReturnsEverything([own, other]))
    (guide,) = guidance.val_guides([SEED])
    assert guide is not None and guide.experiences == (other,)
    assert guidance.leaks_blocked == 1
    assert guidance.val_metrics([guide])["experience/val_leaks_blocked"] == 1.0
