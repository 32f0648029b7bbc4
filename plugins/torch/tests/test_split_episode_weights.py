"""An episode that became several samples (gateway calls that did not extend one another) weighs
as one episode in the loss: hand-computed values for every aggregation mode, and `make_batch`
giving each row its episode's share and token count."""

from __future__ import annotations

import pytest
import torch
from beyondagent_plugin_torch import grpo
from beyondagent_plugin_torch.rollout import Episode
from beyondagent_plugin_torch.update import make_batch

from beyondagent_core.runtime.tokens import TokenSequence
from beyondagent_core.types import Reward, Task, Trajectory

# Rows A1 = [1, 2], A2 = [3] (one episode A split in two), B = [4, 5, 6].
VALUES = torch.tensor([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0], [4.0, 5.0, 6.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
SHARE = torch.tensor([0.5, 0.5, 1.0])
EPISODE_TOKENS = torch.tensor([3.0, 3.0, 3.0])


@pytest.mark.parametrize(("mode", "split_weighted", "per_row"), [
    ("token-mean", 21 / 6, 21 / 6),  # every token once, however the episode split
    ("seq-mean-token-sum", (6 + 15) / 2, (3 + 3 + 15) / 3),
    ("seq-mean-token-mean", (6 / 3 + 15 / 3) / 2, (3 / 2 + 3 / 1 + 15 / 3) / 3),
    ("seq-mean-token-sum-norm", (6 + 15) / 2 / 3, (3 + 3 + 15) / 3 / 3),
])
def test_a_split_episode_weighs_once(mode: str, split_weighted: float, per_row: float) -> None:
    weighted = grpo.aggregate(VALUES, MASK, mode, sequence_share=SHARE, sequence_tokens=EPISODE_TOKENS)
    assert float(weighted) == pytest.approx(split_weighted)
    assert float(grpo.aggregate(VALUES, MASK, mode)) == pytest.approx(per_row)  # verl's: every row a sequence
    # The split episode weighs what the same episode unsplit (A = [1, 2, 3]) weighs.
    unsplit = grpo.aggregate(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), torch.ones(2, 3), mode)
    assert float(weighted) == pytest.approx(float(unsplit))


def test_the_normalizer_counts_episodes() -> None:
    assert grpo.loss_normalizer(MASK, "seq-mean-token-mean", sequence_share=SHARE) == 2.0
    assert grpo.loss_normalizer(MASK, "seq-mean-token-mean") == 3.0
    assert grpo.loss_normalizer(MASK, "token-mean", sequence_share=SHARE) == 6.0
    # Micro-batches of one mini-batch sum to its loss: A1 alone, then A2 and B, with the mini-batch's count.
    normalizer = grpo.loss_normalizer(MASK, "seq-mean-token-mean", sequence_share=SHARE)
    parts = [grpo.aggregate(VALUES[rows], MASK[rows], "seq-mean-token-mean", normalizer=normalizer,
                            sequence_share=SHARE[rows], sequence_tokens=EPISODE_TOKENS[rows])
             for rows in ([0], [1, 2])]
    assert float(sum(parts)) == pytest.approx(3.5)


def sequence(prompt: list[int], *turns: tuple[list[int], list[int]]) -> TokenSequence:
    """A sample: `prompt`, then (model ids, observation ids) pairs."""
    built = TokenSequence(template=None)  # built from ids: the template is never asked
    built.add_context(prompt)
    for generated, observation in turns:
        built.add_generation(generated, [-0.5] * len(generated))
        if observation:
            built.add_context(observation)
    return built


def test_make_batch_gives_each_row_its_episode_weight() -> None:
    trajectory = Trajectory(task=Task("t"), reward=Reward(1.0))
    first, second = sequence([1, 2], ([10, 11], [3])), sequence([1, 4], ([12], []))
    split = Episode(group=0, trajectory=trajectory, sequence=first, more_samples=[second])
    whole = Episode(group=0, trajectory=trajectory, sequence=sequence([1, 2], ([13, 14, 15], [])))
    # Advantages over the split episode's samples laid end to end (5 + 3 tokens), then a number.
    advantages = [[0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 0.0, 3.0], 0.5]
    batch = make_batch([split, whole], advantages, pad_token_id=0, device=torch.device("cpu"))
    assert batch.size == 3
    assert batch.input_ids.tolist() == [[1, 2, 10, 11, 3], [1, 4, 12, 0, 0], [1, 2, 13, 14, 15]]
    assert batch.episode_share.tolist() == [0.5, 0.5, 1.0]
    assert batch.episode_tokens.tolist() == [3.0, 3.0, 3.0]
    assert batch.advantages.tolist() == [[0.0, 1.0, 2.0, 0.0], [0.0, 3.0, 0.0, 0.0], [0.0, 0.5, 0.5, 0.5]]
    # Trained ids are the sampled ids: the tokens under the loss mask, row by row.
    trained = [[int(batch.input_ids[r, t + 1]) for t in range(4) if batch.loss_mask[r, t]] for r in range(3)]
    assert trained == [[10, 11], [12], [13, 14, 15]]
