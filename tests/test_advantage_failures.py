"""Failed episodes leave their groups' statistics (`beyondagent_core.advantages.estimate_finished`).

A third party's estimator (a group-mean baseline written here, as a plugin author would) sees only
the finished episodes of a batch; failed ones get advantage 0 and are counted. The first-party
estimators are checked the same way by the contract suite (`advantage_contract.py`) and in
plugins/advantages/tests/test_advantage_math.py (GRPO's numbers).
"""

from __future__ import annotations

import numpy as np
import pytest

from beyondagent_core import metric_names
from beyondagent_core.advantage_records import advantage_record, scored_from_record
from beyondagent_core.advantages import (
    AdvantageBatch,
    AdvantageError,
    Advantages,
    ScoredEpisode,
    Step,
    estimate_finished,
    failure_of,
    scored_episode,
)
from beyondagent_core.types import Reward, Task, Trajectory, Turn


class MeanBaseline:
    """Outcome minus its group's mean on every model token; remembers the batches it was given."""

    def __init__(self) -> None:
        self.seen: list[AdvantageBatch] = []

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        self.seen.append(batch)
        means = {group: np.mean([batch.episodes[i].outcome for i in members])
                 for group, members in batch.groups().items()}
        return Advantages(per_token=[e.token_mask * np.float32(e.outcome - means[e.group]) for e in batch.episodes],
                          metrics={"groups": float(len(means))},
                          per_step=[np.full(len(e.steps), e.outcome, dtype=np.float32) for e in batch.episodes])


def scored(group: str, outcome: float, failure: str | None = None, *, turns: int = 1) -> ScoredEpisode:
    steps = tuple(Step(start=2 + 3 * i, end=4 + 3 * i, observation="o", action="a") for i in range(turns))
    return ScoredEpisode(group=group, task=Task(task_id=group), outcome=outcome, success=outcome > 0,
                         length=2 + 3 * turns, steps=steps, failure=failure)


def values(result: Advantages, batch: AdvantageBatch) -> list[float]:
    """One number per episode: its advantage on its first model token (0 without one)."""
    return [float(v[e.steps[0].start]) if e.steps else 0.0 for v, e in zip(result.per_token, batch.episodes)]


def test_a_crash_in_a_group_that_all_succeeded_gives_the_others_nothing() -> None:
    batch = AdvantageBatch(episodes=(scored("g", 1.0), scored("g", 1.0), scored("g", 1.0), scored("g", 0.0, "error")))
    # what the group's mean made of it before: the crash's 0 pulled the mean to 0.75
    assert values(MeanBaseline().estimate(batch), batch) == [0.25, 0.25, 0.25, -0.75]
    estimator = MeanBaseline()
    result = estimate_finished(estimator, batch, who="mean")
    assert values(result, batch) == [0.0, 0.0, 0.0, 0.0]
    assert [len(v) for v in result.per_token] == [5, 5, 5, 5]
    assert [e.outcome for e in estimator.seen[0].episodes] == [1.0, 1.0, 1.0]  # the crash never reached it
    assert result.metrics["dropped_episodes"] == 1 and result.metrics["dropped_error"] == 1
    assert result.metrics["dropped_groups"] == 0 and result.metrics["groups"] == 1


def test_siblings_get_what_they_would_without_the_failures_and_the_batch_keeps_its_shape() -> None:
    clean = (scored("a", 1.0), scored("a", 0.0, turns=2), scored("b", 0.5), scored("b", 0.0))
    failed = (scored("a", 0.0, "timeout"), scored("b", 0.0, "split"), scored("a", 0.0, "untrainable", turns=0))
    batch = AdvantageBatch(episodes=(clean[0], failed[0], clean[1], failed[1], clean[2], clean[3], failed[2]),
                           step=3, total_steps=7, norm_by_std=False)
    estimator = MeanBaseline()
    result = estimate_finished(estimator, batch, who="mean")
    alone = MeanBaseline().estimate(AdvantageBatch(episodes=clean))
    expected = [alone.per_token[0], None, alone.per_token[1], None, alone.per_token[2], alone.per_token[3], None]
    for got, want, episode in zip(result.per_token, expected, batch.episodes):
        if want is None:
            np.testing.assert_array_equal(got, np.zeros(episode.length, dtype=np.float32))
        else:
            np.testing.assert_array_equal(got, want)
    assert values(result, batch) == [0.5, 0.0, -0.5, 0.0, 0.25, -0.25, 0.0]
    assert [None if s is None else s.tolist() for s in result.per_step] == [[1.0], None, [0.0, 0.0], None, [0.5],
                                                                             [0.0], None]
    seen = estimator.seen[0]
    assert (seen.step, seen.total_steps, seen.norm_by_std) == (3, 7, False)  # the run's place is kept
    assert {name: result.metrics[name] for name in ("dropped_episodes", "dropped_error", "dropped_timeout",
                                                    "dropped_split", "dropped_untrainable", "dropped_groups")} == {
        "dropped_episodes": 3.0, "dropped_error": 0.0, "dropped_timeout": 1.0, "dropped_split": 1.0,
        "dropped_untrainable": 1.0, "dropped_groups": 0.0}


def test_a_group_failures_leave_with_one_finished_episode_is_skipped_and_counted() -> None:
    batch = AdvantageBatch(episodes=(scored("lone", 1.0), scored("lone", 0.0, "error"), scored("lone", 0.0, "error"),
                                     scored("dead", 0.0, "timeout"), scored("dead", 0.0, "error"),
                                     scored("ok", 1.0), scored("ok", 0.0),
                                     scored("single", 1.0)))  # a group of one from the start: it lost nothing
    estimator = MeanBaseline()
    result = estimate_finished(estimator, batch, who="mean")
    assert values(result, batch) == [0.0, 0.0, 0.0, 0.0, 0.0, 0.5, -0.5, 0.0]
    assert [e.group for e in estimator.seen[0].episodes] == ["ok", "ok", "single"]
    assert result.metrics["dropped_groups"] == 2  # "lone" (one finished left) and "dead" (none)
    assert result.metrics["dropped_episodes"] == 4
    assert result.metrics["dropped_error"] == 3 and result.metrics["dropped_timeout"] == 1


def test_a_batch_of_failures_never_calls_the_estimator() -> None:
    batch = AdvantageBatch(episodes=(scored("g", 0.0, "error"), scored("g", 0.0, "error")))
    estimator = MeanBaseline()
    result = estimate_finished(estimator, batch, who="mean")
    assert estimator.seen == [] and [v.tolist() for v in result.per_token] == [[0.0] * 5] * 2
    assert result.metrics["dropped_episodes"] == 2 and result.metrics["dropped_groups"] == 1


def test_without_failures_the_estimator_sees_the_batch_itself_and_the_counts_are_zero() -> None:
    batch = AdvantageBatch(episodes=(scored("g", 1.0), scored("g", 0.0)))
    estimator = MeanBaseline()
    result = estimate_finished(estimator, batch, who="mean")
    assert estimator.seen == [batch] and values(result, batch) == [0.5, -0.5]
    assert result.metrics["dropped_episodes"] == 0 and result.metrics["dropped_groups"] == 0


def test_a_wrong_answer_on_the_finished_part_still_names_the_estimator() -> None:
    class Short:
        def estimate(self, batch: AdvantageBatch) -> Advantages:
            return Advantages(per_token=[np.zeros(1, dtype=np.float32) for _ in batch.episodes])

    batch = AdvantageBatch(episodes=(scored("g", 1.0), scored("g", 0.0), scored("g", 0.0, "error")))
    with pytest.raises(AdvantageError, match="short one"):
        estimate_finished(Short(), batch, who="short one")


def test_the_metric_names_are_the_ones_metric_names_lists() -> None:
    result = estimate_finished(MeanBaseline(), AdvantageBatch(episodes=(scored("g", 1.0),)), who="mean")
    logged = {f"{metric_names.ADVANTAGE_PREFIX}{name}" for name in result.metrics}
    assert {metric_names.ADVANTAGE_DROPPED_EPISODES, metric_names.ADVANTAGE_DROPPED_GROUPS,
            *(metric_names.advantage_dropped(r) for r in ("error", "timeout", "split", "untrainable"))} <= logged


# --- what counts as failed ----------------------------------------------------------------------


def trajectory(error: str | None = None) -> Trajectory:
    turns = [Turn(role="user", content="go"), Turn(role="assistant", content="done", token_ids=[7, 8])]
    return Trajectory(task=Task(task_id="t"), turns=turns, reward=Reward(0.0 if error else 1.0), error=error)


@pytest.mark.parametrize(("error", "reason"), [
    (None, None),
    ("ValueError: the env returned 3", "error"),
    ("AgentError: agent my.agent:run raised KeyError: 'x'", "error"),
    ("AgentError: agent my.agent:run did not finish within 120 s (workflow.timeout); it made 2 model call(s)",
     "timeout"),
    ("TimeoutError: ", "timeout"),
    ("EnvCallTimeout: FrozenLake.step() took longer than 5 s", "timeout"),
    ("EnvServiceError: http://env/step did not answer within 30s (ReadTimeout)", "timeout"),
    ("GatewaySplit: the agent's 3 model calls became 2 samples", "split"),
    ("PromptTooLong: the prompt is 284 tokens", "error"),
])
def test_what_an_error_counts_as(error: str | None, reason: str | None) -> None:
    assert failure_of(trajectory(error)) == reason


def test_an_episode_without_a_model_token_is_untrainable() -> None:
    assert failure_of(trajectory(), trainable=False) == "untrainable"
    assert failure_of(trajectory("ValueError: x"), trainable=False) == "error"  # the error says more
    assert scored_episode("g", trajectory(), [(2, 4)], 6).failure is None
    assert scored_episode("g", trajectory(), [], 6).failure == "untrainable"  # no span: nothing to train
    assert scored_episode("g", trajectory(), [(2, 4)], 6, trainable=False).failure == "untrainable"
    assert scored_episode("g", trajectory("ValueError: x"), [(2, 4)], 6).failure == "error"


def test_the_record_other_trainers_read_carries_the_failure() -> None:
    finished = advantage_record(trajectory(), [(2, 4)], prompt_length=2, response_length=2)
    crashed = advantage_record(trajectory("GatewaySplit: 2 samples"), [], prompt_length=1, response_length=1)
    assert finished["failure"] is None and crashed["failure"] == "split"
    assert scored_from_record(finished, "u").failure is None
    assert scored_from_record(crashed, "u").failure == "split"
    older = {key: value for key, value in crashed.items() if key != "failure"}  # written before the field
    assert scored_from_record(older, "u").failure is None
