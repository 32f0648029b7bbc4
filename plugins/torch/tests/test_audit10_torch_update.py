"""Audit 10's tests for the torch backend: each guards a mutant that survived the existing tests.

- `test_pausing_waits_for_the_batch_already_generating` (A2): `RolloutPipeline.paused` lets validation in
  only after a batch that was generating has finished (it shares the scheduler and the runner with it).
- `test_a_split_episode_counts_once_in_the_mini_batch_normalizer` (U2): `grpo_update` passes the rows'
  episode shares to the mini-batch's loss normalizer, so an episode split into several samples is one
  sequence of the seq-mean modes' count, not one per row.
- `test_gspo_weighs_each_tokens_loss_by_its_importance_weight` (U5): GSPO's loss multiplies each token's
  loss by the truncated importance weights (asynchronous rollout), as the vanilla loss does.

Everything is deterministic: threads hand over through events and the pipeline's own lock, no sleeps.
"""

from __future__ import annotations

import threading

import pytest
import torch
from beyondagent_plugin_torch import grpo
from beyondagent_plugin_torch.async_rollout import RolloutPipeline
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.rollout import Episode
from beyondagent_plugin_torch.update import grpo_update, make_batch
from tiny_and_real import loaded_policy

from beyondagent_core.runtime.tokens import TokenSequence
from beyondagent_core.spec import AlgorithmSection
from beyondagent_core.types import Reward, Task, Trajectory

pytestmark = pytest.mark.beyondagent_plugins("torch")


# ------------------------------------------------------------------------------ A2: pausing the rollout


def test_pausing_waits_for_the_batch_already_generating() -> None:
    started, trainer_holds_lock = threading.Event(), threading.Event()
    finished: list[int] = []
    holder: list[RolloutPipeline] = []

    def produce(step: int, version: int) -> int:
        started.set()
        assert trainer_holds_lock.wait(10)
        # The trainer holds the pipeline's lock: this batch can only finish while `paused()` waits (and so
        # releases it); a `paused()` that did not wait would run its body with this batch still generating.
        with holder[0]._changed:
            pass
        finished.append(step)
        return step

    pipeline = RolloutPipeline(produce, start_step=0, total_steps=2, version_of=lambda step: step - 1)
    holder.append(pipeline)
    try:
        assert started.wait(10)
        with pipeline._changed:
            trainer_holds_lock.set()
            with pipeline.paused():
                seen = (list(finished), pipeline._generating)
        assert seen == ([1], False)
        assert pipeline.take(1)[0] == 1
    finally:
        trainer_holds_lock.set()
        pipeline.close()


# ------------------------------------------------------------- U2: a split episode in the loss normalizer


def sample(prompt: list[int], generated: list[int]) -> TokenSequence:
    built = TokenSequence(template=None)  # built from ids: the template is never asked
    built.add_context(prompt)
    built.add_generation(generated, [-0.5] * len(generated))
    return built


@pytest.fixture(scope="module")
def tiny_model():
    model, _ = loaded_policy("tiny")
    return model


@pytest.mark.parametrize(("mode", "expected"), [
    # A (advantage 1) split into rows of 2 and 1 model tokens, B (advantage 0.5) one row of 3; the policy is
    # the one that sampled (one optimizer step), so each token's loss is -A. Two episodes, not three rows:
    ("seq-mean-token-sum", (-1.0 * 3 - 0.5 * 3) / 2),
    ("seq-mean-token-mean", (-1.0 * 3 / 3 - 0.5 * 3 / 3) / 2),
])
def test_a_split_episode_counts_once_in_the_mini_batch_normalizer(tiny_model, mode: str, expected: float) -> None:
    trajectory = Trajectory(task=Task("t"), reward=Reward(1.0))
    split = Episode(group=0, trajectory=trajectory, sequence=sample([5, 6], [10, 11]),
                    more_samples=[sample([5, 7], [12])])
    whole = Episode(group=0, trajectory=trajectory, sequence=sample([5, 6], [13, 14, 15]))
    batch = make_batch([split, whole], [1.0, 0.5], pad_token_id=0, device=torch.device("cpu"))
    assert batch.episode_share.tolist() == [0.5, 0.5, 1.0]
    for micro in (1, 3):  # whatever the micro-batches, the mini-batch's count
        metrics = grpo_update(tiny_model, None, torch.optim.SGD(tiny_model.parameters(), lr=0.0), batch,
                              algorithm=AlgorithmSection(kl_coef=0.0, loss_agg_mode=mode),
                              config=TorchConfig(micro_batch_size=micro), temperature=1.0,
                              generator=torch.Generator().manual_seed(0))
        tiny_model.zero_grad(set_to_none=True)  # the shared model keeps no gradient of ours
        assert metrics["actor/pg_loss"] == pytest.approx(expected, rel=1e-6)


# --------------------------------------------------------------------- U5: GSPO with importance weights


def test_gspo_weighs_each_tokens_loss_by_its_importance_weight() -> None:
    log_prob = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -1.2, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    advantages = torch.tensor([[1.0, 1.0, 1.0], [-2.0, -2.0, 0.0]])
    weights = torch.tensor([[0.5, 1.0, 2.0], [0.25, 1.0, 0.0]])
    # ratio 1 on every token (old = current): each token's loss is -A, times its weight, token-mean over 5 tokens:
    # (-(0.5 + 1 + 2) + 2 * (0.25 + 1)) / 5 = -0.2 (unweighted: (-3 + 4) / 5 = 0.2)
    expected = float(((-advantages * weights) * mask).sum() / 5)
    assert expected == pytest.approx(-0.2)
    for loss in (grpo.gspo_policy_loss, grpo.policy_loss):  # GSPO as the vanilla loss does
        result = loss(log_prob, log_prob, advantages, mask, is_weights=weights)
        assert float(result.loss) == pytest.approx(expected, rel=1e-6)
    unweighted = grpo.gspo_policy_loss(log_prob, log_prob, advantages, mask)
    assert float(unweighted.loss) == pytest.approx(float((-advantages * mask).sum() / 5), rel=1e-6)
