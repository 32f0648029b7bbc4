"""The learning check: a short GRPO run on a task a tiny random model can learn.

The word game rewards a reply that names a direction; a random 768-token model does so about
one time in ten. Ten GRPO steps must lift the mean reward clearly above where it started,
which guards the sign and normalization of the whole loop (advantages, loss, optimizer).
"""

from __future__ import annotations

import statistics

import pytest
from beyondagent_plugin_torch.metrics_log import read_metrics, read_samples
from torch_test_envs import word_game_spec


@pytest.mark.beyondagent_plugins("torch", "mixers")
def test_grpo_raises_the_reward_of_a_learnable_task(run_spec, test_envs, tmp_path) -> None:
    result = run_spec(word_game_spec(tmp_path, total_steps=10, save_every=5))
    records = read_metrics(result.run_dir)
    rewards = [record["train/reward_mean"] for record in records if "train/reward_mean" in record]
    assert len(rewards) == 10
    start, end = statistics.fmean(rewards[:2]), statistics.fmean(rewards[-2:])
    assert start < 0.3, rewards
    assert end > start + 0.4, rewards
    # Validation ran before the first step and after the last, greedily.
    val = [record for record in records if "val/pass@1" in record]
    assert [record["step"] for record in val] == [0, 10]
    assert val[-1]["val/reward_mean"] > val[0]["val/reward_mean"]
    # Rollout log-probs are the ones training recomputes: same tokens, same positions.
    assert max(record["rollout/logprob_diff"] for record in records if "rollout/logprob_diff" in record) < 1e-4
    assert sorted(p.name for p in (result.run_dir / "checkpoints").iterdir()) == ["step_000005", "step_000010"]
    assert (result.run_dir / "report.html").read_text().count("data:image/png;base64,") >= 3
    assert {sample["split"] for sample in read_samples(result.run_dir)} == {"train", "val"}
    assert result.metrics["steps"] == 10
