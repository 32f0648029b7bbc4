"""DAPO's overlong shaping leaves failed episodes alone (audit 7), even one that holds a reward.

`shape_overlong` adds the soft overlong penalty to each scored episode that ran to its end; an episode
whose trajectory records an error is a failure (left out of training), so its reward and metrics stay as
they are, whatever its length. With max_len 10 and buffer_len 4 a 10-token episode loses 2.0 (factor 2).
"""

from __future__ import annotations

from beyondagent_plugin_torch.rollout import Episode
from test_dapo import bare_trainer, sequence_of

from beyondagent_core.spec import AlgorithmSection, OverlongShaping
from beyondagent_core.types import Reward, Task, Trajectory


def test_a_failed_episode_with_a_reward_is_not_shaped() -> None:
    trainer = bare_trainer(AlgorithmSection(overlong=OverlongShaping(buffer_len=4, penalty_factor=2.0)),
                           max_new_tokens=10)
    scored = Episode(group=0, trajectory=Trajectory(task=Task("t"), reward=Reward(1.0, success=True)),
                     sequence=sequence_of(10))
    failed = Episode(group=0, trajectory=Trajectory(task=Task("t"), reward=Reward(1.0, success=True), error="boom"),
                     sequence=sequence_of(10))
    trainer.shape_overlong([scored, failed])
    assert scored.trajectory.reward.score == -1.0 and scored.trajectory.metrics["overlong_penalty"] == -2.0
    assert failed.trajectory.reward.score == 1.0 and failed.trajectory.reward.details == {}
    assert "overlong_penalty" not in failed.trajectory.metrics
