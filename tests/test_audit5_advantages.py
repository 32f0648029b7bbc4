"""The critic's returns through `estimate_finished` (issue 37's fifth mutation audit): with a failed
episode in the batch, each finished episode keeps the returns its estimator gave it (what the critic
regresses on), and the failed one gets zeros. The estimator is a plugin author's, written here: the
outcome minus the critic's value, the outcome as every model token's return."""

from __future__ import annotations

import numpy as np

from beyondagent_core.advantages import AdvantageBatch, Advantages, ScoredEpisode, Step, estimate_finished
from beyondagent_core.types import Task


class ValueBaseline:
    uses_values = True

    def estimate(self, batch: AdvantageBatch) -> Advantages:
        episodes = batch.episodes
        return Advantages(per_token=[(e.token_mask * (e.outcome - e.values)).astype(np.float32) for e in episodes],
                          returns=[(e.token_mask * e.outcome).astype(np.float32) for e in episodes])


def scored(task: str, outcome: float, failure: str | None = None) -> ScoredEpisode:
    return ScoredEpisode(group=task, task=Task(task_id=task), outcome=outcome, success=outcome > 0, length=5,
                         steps=(Step(start=1, end=3, observation="o", action="a"),), failure=failure,
                         values=np.full(5, 0.25, dtype=np.float32))


def test_finished_episodes_keep_their_returns_beside_a_failed_one() -> None:
    batch = AdvantageBatch(episodes=(scored("a", 1.0), scored("b", 0.0, failure="timeout"), scored("c", 0.5)))
    result = estimate_finished(ValueBaseline(), batch, who="value baseline")
    assert [r.tolist() for r in result.returns] == [[0, 1, 1, 0, 0], [0] * 5, [0, 0.5, 0.5, 0, 0]]
    assert [a.tolist() for a in result.per_token] == [[0, 0.75, 0.75, 0, 0], [0] * 5, [0, 0.25, 0.25, 0, 0]]
    assert result.metrics["dropped_timeout"] == 1.0
