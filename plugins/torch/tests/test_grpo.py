"""GRPO's math against values worked out by hand (verl parity on random inputs: test_grpo_parity.py)."""

from __future__ import annotations

import math

import pytest
import torch
from beyondagent_plugin_torch import grpo

EPS = 1e-6


def tensor(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def close(actual: torch.Tensor, expected) -> None:
    torch.testing.assert_close(actual, tensor(expected) if not isinstance(expected, torch.Tensor) else expected,
                               rtol=1e-12, atol=1e-12, check_dtype=False)


# ------------------------------------------------------------------------------------------ advantages


def test_two_groups_interleaved() -> None:
    # group a: 1, 0, 0.5 -> mean 0.5, unbiased std sqrt((0.25 + 0.25 + 0) / 2) = 0.5
    # group b: 2, 4      -> mean 3,   unbiased std sqrt((1 + 1) / 1) = sqrt(2)
    scores = tensor([1.0, 2.0, 0.0, 4.0, 0.5])
    advantages = grpo.group_advantages(scores, ["a", "b", "a", "b", "a"])
    root2 = math.sqrt(2)
    close(advantages, [0.5 / (0.5 + EPS), -1 / (root2 + EPS), -0.5 / (0.5 + EPS), 1 / (root2 + EPS), 0.0])


def test_without_std_normalization_only_the_mean_is_removed() -> None:
    scores = tensor([1.0, 2.0, 0.0, 4.0, 0.5])
    close(grpo.group_advantages(scores, ["a", "b", "a", "b", "a"], norm_by_std=False), [0.5, -1.0, -0.5, 1.0, 0.0])


def test_a_group_of_one_keeps_its_raw_score_as_verl_does() -> None:
    # verl: a singleton group has mean 0 and std 1, so its advantage is score / (1 + eps), not 0.
    scores = tensor([0.7, 1.0, 3.0])
    ids = [("task", 1), ("task", 2), ("task", 2)]
    close(grpo.group_advantages(scores, ids), [0.7 / (1 + EPS), -1 / (math.sqrt(2) + EPS), 1 / (math.sqrt(2) + EPS)])
    close(grpo.group_advantages(scores, ids, norm_by_std=False), [0.7, -1.0, 1.0])


def test_equal_scores_give_zero_advantage_and_eps_is_used() -> None:
    close(grpo.group_advantages(tensor([1.0, 1.0, 1.0]), [0, 0, 0]), [0.0, 0.0, 0.0])
    close(grpo.group_advantages(tensor([0.0, 1.0]), [0, 0], eps=0.5),
          [-0.5 / (math.sqrt(0.5) + 0.5), 0.5 / (math.sqrt(0.5) + 0.5)])


def test_integer_scores_and_shape_errors() -> None:
    advantages = grpo.group_advantages(torch.tensor([1, 0]), ["t", "t"])
    assert advantages.is_floating_point()
    torch.testing.assert_close(advantages, torch.tensor([0.5, -0.5]) / (math.sqrt(0.5) + EPS))
    with pytest.raises(ValueError, match="one entry per group id"):
        grpo.group_advantages(tensor([1.0, 0.0]), ["t"])


def test_token_advantages_broadcast_over_response_tokens_only() -> None:
    mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    close(grpo.token_advantages(tensor([2.0, -1.0]), mask), [[2.0, 2.0, 0.0], [0.0, -1.0, -1.0]])


# ------------------------------------------------------------------------------- log-probs and entropy


def test_log_probs_of_a_two_token_vocabulary() -> None:
    logits = tensor([[[0.0, math.log(3)], [0.0, math.log(3)]]])  # p = (1/4, 3/4)
    labels = torch.tensor([[1, 0]])
    close(grpo.log_probs_from_logits(logits, labels), [[math.log(0.75), math.log(0.25)]])
    # temperature 2: logits (0, ln 3 / 2) -> p = (1, sqrt 3) / (1 + sqrt 3)
    root3 = math.sqrt(3)
    close(grpo.log_probs_from_logits(logits, labels, temperature=2.0),
          [[math.log(root3 / (1 + root3)), math.log(1 / (1 + root3))]])


def test_log_probs_equal_log_softmax_and_carry_gradients() -> None:
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=generator, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 11, (3, 5), generator=generator)
    ours = grpo.log_probs_from_logits(logits, labels, temperature=0.7)
    reference = torch.log_softmax(logits / 0.7, dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(ours, reference)
    (grad,) = torch.autograd.grad(ours.sum(), logits)
    (expected,) = torch.autograd.grad(reference.sum(), logits)
    torch.testing.assert_close(grad, expected)


def test_bfloat16_logits_give_float32_log_probs() -> None:
    logits = torch.tensor([[[0.0, math.log(3)]]], dtype=torch.bfloat16)
    log_probs = grpo.log_probs_from_logits(logits, torch.tensor([[1]]))
    assert log_probs.dtype == torch.float32
    assert abs(log_probs.item() - math.log(0.75)) < 1e-2  # bf16 rounds ln 3


def test_entropy() -> None:
    uniform = torch.zeros(1, 2, 4, dtype=torch.float64)
    close(grpo.entropy_from_logits(uniform), [[math.log(4), math.log(4)]])
    skewed = tensor([[[0.0, math.log(3)]]])  # p = (1/4, 3/4)
    close(grpo.entropy_from_logits(skewed), [[-(0.25 * math.log(0.25) + 0.75 * math.log(0.75))]])
    p = 1 / (1 + math.sqrt(3))  # temperature 2, as in the log-prob test
    close(grpo.entropy_from_logits(skewed, temperature=2.0), [[-(p * math.log(p) + (1 - p) * math.log(1 - p))]])


def test_temperature_must_be_positive() -> None:
    with pytest.raises(ValueError, match="temperature"):
        grpo.log_probs_from_logits(torch.zeros(1, 1, 2), torch.zeros(1, 1, dtype=torch.long), temperature=0.0)


# ------------------------------------------------------------------------------------------------- KL

HALF, QUARTER = math.log(0.5), math.log(0.25)  # policy says 1/2, reference says 1/4: log ratio ln 2


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("kl", math.log(2)),  # k1 = ln 2
        ("abs", math.log(2)),
        ("mse", 0.5 * math.log(2) ** 2),  # k2
        ("low_var_kl", 0.5 + math.log(2) - 1),  # k3: d = ln(1/4) - ln(1/2) = -ln 2 -> e^d - d - 1
    ],
)
def test_each_kl_type_on_a_known_pair(kind: str, expected: float) -> None:
    close(grpo.kl_penalty(tensor([[HALF]]), tensor([[QUARTER]]), kind), [[expected]])


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("kl", -math.log(2)), ("abs", math.log(2)), ("mse", 0.5 * math.log(2) ** 2), ("low_var_kl", 2 - math.log(2) - 1)],
)
def test_each_kl_type_on_the_reversed_pair(kind: str, expected: float) -> None:
    close(grpo.kl_penalty(tensor([[QUARTER]]), tensor([[HALF]]), kind), [[expected]])


def test_low_var_kl_is_clamped_like_verl() -> None:
    # d clamped to [-20, 20] first: e^-20 + 20 - 1 ~ 19 and e^20 - 21 are both then clamped to 10
    assert grpo.kl_penalty(tensor([[0.0, -100.0]]), tensor([[-100.0, 0.0]]), "low_var_kl").tolist() == [[10.0, 10.0]]
    assert set(grpo.KL_TYPES) == {"low_var_kl", "kl", "mse", "abs"}


def test_unknown_kl_type_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="'k3'.*low_var_kl, kl, mse, abs"):
        grpo.kl_penalty(tensor([[0.0]]), tensor([[0.0]]), "k3")


# ---------------------------------------------------------------------------------------- aggregation

VALUES = tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
MASK = tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0]])  # row 0: two tokens, row 1: one, row 2: none


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", (1 + 2 + 4) / 3),
        ("seq-mean-token-sum", (3 + 4) / 2),  # the empty row is not a sequence
        ("seq-mean-token-mean", (3 / (2 + 1e-8) + 4 / (1 + 1e-8)) / 2),  # verl's 1e-8 in each sequence's count
        ("seq-mean-token-sum-norm", (3 + 4) / 2 / 3),  # / padded length T = 3
    ],
)
def test_each_aggregation_mode(mode: str, expected: float) -> None:
    close(grpo.aggregate(VALUES, MASK, mode), expected)
    close(grpo.aggregate(VALUES, MASK.bool(), mode), expected)


def test_seq_mean_token_sum_norm_with_a_constant_length() -> None:
    close(grpo.aggregate(VALUES, MASK, "seq-mean-token-sum-norm", loss_scale_factor=7), (3 + 4) / 2 / 7)


@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
def test_masked_tokens_do_not_contribute_even_as_nan(mode: str) -> None:
    poisoned = torch.where(MASK.bool(), VALUES, torch.nan)
    close(grpo.aggregate(poisoned, MASK, mode), grpo.aggregate(VALUES, MASK, mode))


@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
def test_a_batch_without_tokens_aggregates_to_zero(mode: str) -> None:
    values = VALUES.clone().requires_grad_()
    loss = grpo.aggregate(values, torch.zeros_like(MASK), mode)
    loss.backward()
    assert loss.item() == 0.0 and values.grad.abs().sum().item() == 0.0  # verl would give NaN here


def test_normalizer_by_hand() -> None:
    values, mask = tensor([[1.0, 2.0], [3.0, 0.0]]), tensor([[1, 1], [1, 0]])
    assert grpo.loss_normalizer(mask, "token-mean") == 3.0
    micro = [grpo.aggregate(values[i : i + 1], mask[i : i + 1], "token-mean", normalizer=3.0) for i in range(2)]
    close(torch.stack(micro), [(1 + 2) / 3, 3 / 3])  # sums to the full batch's token-mean, 2
    close(grpo.aggregate(values, mask, "token-mean"), 2.0)


@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
def test_micro_batch_losses_sum_to_the_mini_batch_loss(mode: str) -> None:
    generator = torch.Generator().manual_seed(1)
    values = torch.randn(6, 5, generator=generator, dtype=torch.float64, requires_grad=True)
    lengths = [5, 2, 0, 3, 1, 4]
    mask = (torch.arange(5) < torch.tensor(lengths).unsqueeze(-1)).double()
    full = grpo.aggregate(values, mask, mode)
    (full_grad,) = torch.autograd.grad(full, values)

    normalizer = grpo.loss_normalizer(mask, mode)
    assert normalizer == (15.0 if mode == "token-mean" else 5.0)
    micro_total = sum(
        grpo.aggregate(values[rows], mask[rows], mode, normalizer=normalizer)
        for rows in (slice(0, 2), slice(2, 5), slice(5, 6))
    )
    (micro_grad,) = torch.autograd.grad(micro_total, values)
    close(micro_total, full)
    close(micro_grad, full_grad)


def test_micro_batches_trimmed_to_their_own_length_need_a_constant_scale() -> None:
    values, mask = tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]]), tensor([[1, 1, 1], [1, 0, 0]])
    mode = "seq-mean-token-sum-norm"
    full = grpo.aggregate(values, mask, mode, loss_scale_factor=3)  # (6 + 4) / 2 / 3
    trimmed = grpo.aggregate(values[:1], mask[:1], mode, normalizer=2, loss_scale_factor=3) + grpo.aggregate(
        values[1:, :1], mask[1:, :1], mode, normalizer=2, loss_scale_factor=3)
    close(full, 10 / 6)
    close(trimmed, full)


def test_bad_mode_and_normalizer() -> None:
    with pytest.raises(ValueError, match="'token-sum'.*token-mean, seq-mean-token-sum, seq-mean-token-mean"):
        grpo.aggregate(VALUES, MASK, "token-sum")
    with pytest.raises(ValueError, match="normalizer"):
        grpo.aggregate(VALUES, MASK, "token-mean", normalizer=0)
    with pytest.raises(ValueError, match="unknown loss aggregation mode"):
        grpo.loss_normalizer(MASK, "sum")


# ---------------------------------------------------------------------------------------- policy loss
# Six tokens, each with old log-prob 0 and new log-prob ln r, clip 0.2 and dual clip c = 3:
#   A   r    -A r   -A clip(r, .8, 1.2)   max    A < 0: min(max, -3A)   what happened
#  +1  1.1   -1.1   -1.1                 -1.1   -                      inside the trust region
#  +1  1.5   -1.5   -1.2                 -1.2   -                      clipped
#  +1  0.5   -0.5   -0.8                 -0.5   -                      not clipped (pessimistic side)
#  -1  0.5    0.5    0.8                  0.8   0.8                    clipped
#  -1  5.0    5.0    1.2                  5.0   3.0                    dual-clipped
#  -1  2.0    2.0    1.2                  2.0   2.0                    below the dual bound
ADVANTAGES = tensor([[1.0, 1.0, 1.0, -1.0, -1.0, -1.0]])
RATIOS = [1.1, 1.5, 0.5, 0.5, 5.0, 2.0]
PER_TOKEN = [-1.1, -1.2, -0.5, 0.8, 3.0, 2.0]


def test_policy_loss_clipping_and_dual_clipping() -> None:
    log_prob = tensor([[math.log(r) for r in RATIOS]]).requires_grad_()
    result = grpo.policy_loss(torch.zeros_like(log_prob), log_prob, ADVANTAGES, torch.ones_like(log_prob))
    close(result.loss, sum(PER_TOKEN) / 6)
    close(result.clip_fraction, 2 / 6 / (1 + 1e-8 / 6))  # verl's masked_mean adds 1e-8 to the count
    close(result.dual_clip_fraction, 1 / 6 / (1 + 1e-8 / 6))
    close(result.approx_kl, -math.log(1.1 * 1.5 * 0.5 * 0.5 * 5.0 * 2.0) / 6 / (1 + 1e-8 / 6))
    result.loss.backward()
    # d(-A r)/d log p = -A r where the unclipped term is active, 0 where a clip is
    close(log_prob.grad, [[-1.1 / 6, 0.0, -0.5 / 6, 0.0, 0.0, 2.0 / 6]])
    assert not result.clip_fraction.requires_grad


def test_asymmetric_clip_range() -> None:
    log_prob, old, advantage, mask = tensor([[math.log(1.25)]]), tensor([[0.0]]), tensor([[1.0]]), tensor([[1.0]])
    close(grpo.policy_loss(old, log_prob, advantage, mask).loss, -1.2)
    close(grpo.policy_loss(old, log_prob, advantage, mask, clip_ratio_high=0.28).loss, -1.25)
    # the low side: A < 0, r = 0.75 is clipped to 0.8 by default, kept by clip_ratio_low = 0.3
    log_prob, advantage = tensor([[math.log(0.75)]]), tensor([[-1.0]])
    close(grpo.policy_loss(old, log_prob, advantage, mask).loss, 0.8)
    close(grpo.policy_loss(old, log_prob, advantage, mask, clip_ratio_low=0.3).loss, 0.75)


def test_masked_tokens_do_not_change_the_policy_loss_or_its_metrics() -> None:
    log_prob = tensor([[math.log(r) for r in RATIOS] + [math.log(50.0)]])
    advantages = torch.cat([ADVANTAGES, tensor([[-1.0]])], dim=1)
    mask = tensor([[1, 1, 1, 1, 1, 1, 0]])
    result = grpo.policy_loss(torch.zeros_like(log_prob), log_prob, advantages, mask)
    close(result.loss, sum(PER_TOKEN) / 6)
    close(result.dual_clip_fraction, 1 / 6 / (1 + 1e-8 / 6))


def test_policy_loss_uses_the_aggregation_mode_and_normalizer() -> None:
    # two sequences: tokens 1-3 and tokens 4-6 of the table above
    log_prob = tensor([[math.log(r) for r in RATIOS[:3]], [math.log(r) for r in RATIOS[3:]]])
    advantages, mask = ADVANTAGES.reshape(2, 3), torch.ones(2, 3, dtype=torch.float64)
    old = torch.zeros_like(log_prob)
    seq_sums = [sum(PER_TOKEN[:3]), sum(PER_TOKEN[3:])]
    close(grpo.policy_loss(old, log_prob, advantages, mask, loss_agg_mode="seq-mean-token-sum").loss, sum(seq_sums) / 2)
    half = grpo.policy_loss(old[:1], log_prob[:1], advantages[:1], mask[:1], loss_agg_mode="seq-mean-token-mean",
                            normalizer=2.0)
    close(half.loss, seq_sums[0] / (3 + 1e-8) / 2)


def test_dual_clip_bound_must_exceed_one() -> None:
    with pytest.raises(ValueError, match="clip_ratio_c"):
        grpo.policy_loss(tensor([[0.0]]), tensor([[0.0]]), tensor([[1.0]]), tensor([[1.0]]), clip_ratio_c=1.0)


def test_per_row_clips_equal_the_scalar_loss_of_each_row() -> None:
    # Off-policy (experience-stripped) rows get their own upper clip and dual clip: per row, the
    # loss is the one the scalar settings give that row alone.
    generator = torch.Generator().manual_seed(0)
    old = -torch.rand(4, 6, generator=generator, dtype=torch.float64)
    new = old + torch.randn(4, 6, generator=generator, dtype=torch.float64)
    advantages = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    mask = torch.ones(4, 6, dtype=torch.float64)
    off = torch.tensor([True, False, True, False])[:, None]
    high = torch.where(off, torch.tensor(0.6, dtype=torch.float64), 0.2)
    dual = torch.where(off, torch.tensor(5.0, dtype=torch.float64), 3.0)
    mixed = grpo.policy_loss(old, new, advantages, mask, clip_ratio=0.2, clip_ratio_high=high, clip_ratio_c=dual,
                             loss_agg_mode="seq-mean-token-sum")
    rows = [grpo.policy_loss(old[i:i + 1], new[i:i + 1], advantages[i:i + 1], mask[i:i + 1], clip_ratio=0.2,
                             clip_ratio_high=0.6 if bool(off[i]) else 0.2, clip_ratio_c=5.0 if bool(off[i]) else 3.0,
                             loss_agg_mode="seq-mean-token-sum").loss for i in range(4)]
    close(mixed.loss, torch.stack(rows).mean())
