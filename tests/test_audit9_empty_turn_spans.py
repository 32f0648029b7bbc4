"""An episode whose model turns hold no token is untrainable, however many turns it had (ninth audit).

`scored_episode` decides, when the backend does not say, whether an episode has tokens to train from
its model turns' token spans: a turn that generated nothing has an empty span `(start, start)`. Only
a span with at least one token makes an episode trainable; one whose every span is empty is dropped
from its group as `untrainable`, like one without spans.
"""

from __future__ import annotations

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, Advantages, estimate_finished, scored_episode
from beyondagent_core.types import Reward, Task, Trajectory, Turn


def trajectory(score: float = 1.0) -> Trajectory:
    turns = [Turn("user", "go"), Turn("assistant", "", token_ids=[]), Turn("user", "again"),
             Turn("assistant", "", token_ids=[])]
    return Trajectory(task=Task(task_id="t"), turns=turns, reward=Reward(score, success=score > 0))


def test_empty_spans_leave_an_episode_untrainable() -> None:
    assert scored_episode("g", trajectory(), [(4, 4)], 6).failure == "untrainable"
    assert scored_episode("g", trajectory(), [(4, 4), (6, 6)], 8).failure == "untrainable"


def test_one_span_with_a_token_makes_the_episode_trainable() -> None:
    assert scored_episode("g", trajectory(), [(4, 4), (6, 7)], 8).failure is None


class Zeros:
    """An estimator that answers zeros and remembers how many episodes it saw."""

    def __init__(self) -> None:
        self.seen = 0

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        self.seen = len(batch.episodes)
        return Advantages(per_token=[np.zeros(e.length, dtype=np.float32) for e in batch.episodes])


def test_an_episode_of_empty_turns_leaves_its_group_and_is_counted() -> None:
    episodes = (scored_episode("g", trajectory(1.0), [(4, 4), (6, 6)], 8),
                scored_episode("g", trajectory(0.0), [(4, 5), (7, 8)], 8),
                scored_episode("g", trajectory(1.0), [(4, 6), (8, 9)], 9))
    estimator = Zeros()
    result = estimate_finished(estimator, AdvantageBatch(episodes=episodes), who="zeros")
    assert estimator.seen == 2
    assert result.metrics["dropped_untrainable"] == 1.0
