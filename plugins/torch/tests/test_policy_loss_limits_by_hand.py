"""GRPO's loss math (grpo.py) at its limits, by hand, the cases test_grpo.py and test_dapo.py leave open:

- every clip bound exactly on its limit and one past (ratios 2, 4 and 1/2 are exact in float64, so the
  strict comparisons of the clip metrics are tested where they switch): the upper clip, the lower clip, the
  dual clip, each for positive and negative advantages, with scalar and per-row (tensor) clip bounds;
- `clip_ratio` itself non-default on both sides, and `clip_ratio_low` / `clip_ratio_high` overriding it;
- GSPO's lower clip for a negative advantage, its per-row upper clip, and a row without tokens (its
  length is clamped to 1, so no NaN reaches the gradient);
- the TIS weights' lower log-ratio clamp and a cap below 1;
- `loss_normalizer` of a mini-batch without tokens (1, never 0) and the normalizer's refusals;
- the overlong penalty's refusals on and past `0 < buffer_len < max_len`, and a factor of 0.
"""

from __future__ import annotations

import math

import pytest
import torch
from beyondagent_plugin_torch import grpo

pytestmark = pytest.mark.beyondagent_plugins("torch")

M = 1e-8  # verl's masked_mean adds it to the token count of every clip metric


def t(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def loss_of(ratios, advantages, **clips) -> grpo.PolicyLoss:
    """The vanilla loss of one row whose tokens have these exact ratios (old log-prob 0, new log ratio)."""
    log_prob = t([[math.log(r) for r in ratios]])
    return grpo.policy_loss(torch.zeros_like(log_prob), log_prob, t([advantages]), torch.ones_like(log_prob),
                            **clips)


# ------------------------------------------------------------------------------------------ vanilla PPO


@pytest.mark.parametrize(("ratio", "advantage", "clips", "loss", "clipped"), [
    # upper bound 1 + 1.0 = 2: exactly on it nothing is clipped (the clipped and the plain term are equal)
    (2.0, 1.0, {"clip_ratio_high": 1.0}, -2.0, 0),
    (4.0, 1.0, {"clip_ratio_high": 1.0}, -2.0, 1),  # past it: clipped to 2
    (4.0, -1.0, {"clip_ratio_high": 1.0}, 3.0, 0),  # A < 0 above the bound: the ratio itself, dual-clipped to 3
    # lower bound 1 - 0.5: on it not clipped; past it (1/4) a negative advantage is held at 1/2
    (0.5, -1.0, {"clip_ratio_low": 0.5}, 0.5, 0),
    (0.25, -1.0, {"clip_ratio_low": 0.5}, 0.5, 1),
    (0.25, 1.0, {"clip_ratio_low": 0.5}, -0.25, 0),  # A > 0 below the bound: the pessimistic ratio itself
    # clip_ratio 1.0 (not the default 0.2) sets both bounds: [0, 2]
    (2.0, 1.0, {"clip_ratio": 1.0}, -2.0, 0),
    (4.0, 1.0, {"clip_ratio": 1.0}, -2.0, 1),
    (0.5, -1.0, {"clip_ratio": 0.5}, 0.5, 0),
    (0.25, -1.0, {"clip_ratio": 0.5}, 0.5, 1),
    # clip_ratio_high / clip_ratio_low override clip_ratio on their own side only
    (4.0, 1.0, {"clip_ratio": 0.5, "clip_ratio_high": 3.0}, -4.0, 0),
    (0.25, -1.0, {"clip_ratio": 0.5, "clip_ratio_high": 3.0}, 0.5, 1),
    (0.25, -1.0, {"clip_ratio": 0.5, "clip_ratio_low": 0.75}, 0.25, 0),
    (4.0, 1.0, {"clip_ratio": 1.0, "clip_ratio_low": 0.75}, -2.0, 1),
])
def test_each_clip_bound_on_its_limit_and_past_it(ratio, advantage, clips, loss, clipped) -> None:
    result = loss_of([ratio], [advantage], **clips)
    assert float(result.loss) == pytest.approx(loss, rel=1e-12)
    assert float(result.clip_fraction) == pytest.approx(clipped / (1 + M), rel=1e-12)


@pytest.mark.parametrize(("c", "loss", "dual"), [(4.0, 4.0, 0), (3.5, 3.5, 1), (5.0, 4.0, 0)])
def test_the_dual_clip_on_its_limit_and_past_it(c: float, loss: float, dual: int) -> None:
    # ratio 4 and A = -1: the clipped loss is max(4, 1.2) = 4; the dual bound -A c holds it at c when c < 4
    result = loss_of([4.0], [-1.0], clip_ratio_c=c)
    assert float(result.loss) == pytest.approx(loss, rel=1e-12)
    assert float(result.dual_clip_fraction) == pytest.approx(dual / (1 + M), rel=1e-12)
    # a positive advantage is never dual-clipped, however far the ratio went
    assert float(loss_of([0.25], [1.0], clip_ratio_c=c).dual_clip_fraction) == 0.0


def test_the_dual_clip_bound_must_be_above_one_in_every_row() -> None:
    loss_of([1.0], [1.0], clip_ratio_c=1.001)  # just above: fine
    loss_of([1.0], [1.0], clip_ratio_c=1 + 1e-9)  # the spec accepts it (> 1): not rounded to 1 in float32
    with pytest.raises(ValueError, match="clip_ratio_c"):
        loss_of([1.0], [1.0], clip_ratio_c=t([[3.0], [1.0]])[1:])  # one row's bound on the limit
    with pytest.raises(ValueError, match="clip_ratio_c"):
        grpo.policy_loss(t([[0.0], [0.0]]), t([[0.0], [0.0]]), t([[1.0], [1.0]]), t([[1.0], [1.0]]),
                         clip_ratio_c=t([[3.0], [0.5]]))


def test_per_row_upper_clips_keep_the_scalar_lower_clip() -> None:
    # row 0 bound 1 + 1.0 (ratio 4 clipped to 2), row 1 bound 1 + 3.0 (ratio 4 kept); both rows also hold a
    # ratio 1/4 with A < 0, held at 1 - clip_ratio_low = 1/2 whatever the row's upper bound
    log_prob = t([[math.log(4.0), math.log(0.25)], [math.log(4.0), math.log(0.25)]])
    advantages = t([[1.0, -1.0], [1.0, -1.0]])
    result = grpo.policy_loss(torch.zeros_like(log_prob), log_prob, advantages, torch.ones_like(log_prob),
                              clip_ratio_low=0.5, clip_ratio_high=t([[1.0], [3.0]]), loss_agg_mode="seq-mean-token-sum")
    assert float(result.loss) == pytest.approx(((-2.0 + 0.5) + (-4.0 + 0.5)) / 2, rel=1e-12)
    assert float(result.clip_fraction) == pytest.approx(3 / (4 + M), rel=1e-12)


# ------------------------------------------------------------------------------------------------- GSPO


def gspo(log_ratios, advantages, mask=None, **clips) -> tuple[grpo.PolicyLoss, torch.Tensor]:
    old = t([[-1.0] * len(row) for row in log_ratios])
    log_prob = (old + t(log_ratios)).requires_grad_()
    mask = torch.ones_like(old) if mask is None else t(mask)
    result = grpo.gspo_policy_loss(old, log_prob, t(advantages), mask, **clips)
    result.loss.backward()
    return grpo.PolicyLoss(result.loss.detach(), result.clip_fraction, result.dual_clip_fraction,
                           result.approx_kl), log_prob.grad


def test_gspo_holds_a_negative_advantage_at_the_lower_bound() -> None:
    # log ratios -1.6, -1.2 -> s = e^-1.4 = 0.247 < 1 - 0.5: A = -1 takes 0.5 on each token, no gradient
    result, grad = gspo([[-1.6, -1.2]], [[-1.0, -1.0]], clip_ratio_low=0.5)
    assert float(result.loss.detach()) == pytest.approx(0.5, rel=1e-12) and grad.abs().sum() == 0
    assert float(result.clip_fraction) == pytest.approx(1 / (1 + M / 2), rel=1e-12)
    # with the default bound 0.8 the same row is clipped to 0.8; a lower bound below s leaves it alone
    assert float(gspo([[-1.6, -1.2]], [[-1.0, -1.0]])[0].loss) == pytest.approx(0.8, rel=1e-12)
    kept, grad = gspo([[-1.6, -1.2]], [[-1.0, -1.0]], clip_ratio=0.8)
    assert float(kept.loss) == pytest.approx(math.exp(-1.4), rel=1e-12)
    assert grad[0].tolist() == pytest.approx([math.exp(-1.4) / 2] * 2, rel=1e-12)  # d(-A s_bt)/d log p_t / 2 tokens


def test_gspo_per_row_upper_clip() -> None:
    # both rows s = e^0.4 = 1.49 with A = 1: row 0's bound 1.2 clips it, row 1's 1.6 does not
    result, grad = gspo([[0.4, 0.4], [0.4, 0.4]], [[1.0, 1.0], [1.0, 1.0]], clip_ratio_high=t([[0.2], [0.6]]))
    assert float(result.loss) == pytest.approx((2 * -1.2 + 2 * -math.exp(0.4)) / 4, rel=1e-12)
    assert grad[0].abs().sum() == 0 and grad[1].tolist() == pytest.approx([-math.exp(0.4) / 4] * 2, rel=1e-12)


def test_a_gspo_row_without_tokens_adds_nothing_and_no_nan() -> None:
    result, grad = gspo([[0.1, 0.1], [0.3, 0.3]], [[1.0, 1.0], [1.0, 1.0]], mask=[[1, 1], [0, 0]])
    assert float(result.loss) == pytest.approx(-math.exp(0.1), rel=1e-12)
    assert torch.isfinite(grad).all() and grad[1].tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------------------------ TIS weights


def test_tis_weights_clamp_the_log_ratio_below_too_and_cap_below_one() -> None:
    tiny = grpo.truncated_is_weights(t([[-100.0]]), t([[0.0]]), t([[1.0]]), cap=2.0)
    assert float(tiny) == pytest.approx(math.exp(-20.0), rel=1e-12)  # not e^-100 = 0: verl's safety bound
    # a cap of 1/2: every token at most 1/2, a token that lags nothing (ratio 1) included
    weights = grpo.truncated_is_weights(t([[0.0, math.log(0.25), 1.0]]), t([[0.0, 0.0, 0.0]]), t([[1, 1, 1]]),
                                        cap=0.5)
    assert weights[0].tolist() == pytest.approx([0.5, 0.25, 0.5], rel=1e-12)
    # exactly on the cap: the weight is the cap
    assert float(grpo.truncated_is_weights(t([[math.log(2.0)]]), t([[0.0]]), t([[1.0]]), cap=2.0)) == 2.0
    with pytest.raises(ValueError, match="cap must be positive"):
        grpo.truncated_is_weights(t([[0.0]]), t([[0.0]]), t([[1.0]]), cap=-1.0)


# ---------------------------------------------------------------------------------------- normalization


@pytest.mark.parametrize("mode", grpo.LOSS_AGG_MODES)
def test_a_mini_batch_without_tokens_has_normalizer_one(mode: str) -> None:
    empty = torch.zeros(3, 4)
    assert grpo.loss_normalizer(empty, mode) == 1.0
    assert grpo.loss_normalizer(empty, mode, sequence_share=torch.tensor([0.5, 0.5, 1.0])) == 1.0
    # and the aggregation it feeds stays 0 (not 0/0)
    assert float(grpo.aggregate(torch.ones(3, 4), empty, mode, normalizer=grpo.loss_normalizer(empty, mode))) == 0.0


def test_the_seq_mean_normalizer_counts_rows_with_tokens_and_shares_below_one() -> None:
    mask = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    assert grpo.loss_normalizer(mask, "seq-mean-token-sum") == 2.0  # the empty row is no sequence
    assert grpo.loss_normalizer(mask, "token-mean") == 3.0
    # one split episode of two rows (shares 1/2): half an episode is counted as such, the floor is 1
    assert grpo.loss_normalizer(mask[:1], "seq-mean-token-mean", sequence_share=torch.tensor([0.5])) == 1.0
    assert grpo.loss_normalizer(mask, "seq-mean-token-mean", sequence_share=torch.tensor([0.5, 1.0, 0.5])) == 1.0
    assert grpo.loss_normalizer(mask, "seq-mean-token-mean", sequence_share=torch.tensor([1.0, 1.0, 0.5])) == 1.5


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_a_normalizer_must_be_a_positive_count(bad: float) -> None:
    with pytest.raises(ValueError, match="normalizer must be a positive count"):
        grpo.aggregate(torch.ones(1, 2), torch.ones(1, 2), "seq-mean-token-sum", normalizer=bad)
    assert float(grpo.aggregate(torch.ones(1, 2), torch.ones(1, 2), "token-mean", normalizer=1e-3)) == \
        pytest.approx(2e3)


# ---------------------------------------------------------------------------------------------- overlong


@pytest.mark.parametrize(("buffer_len", "max_len", "ok"), [(9, 10, True), (10, 10, False), (11, 10, False),
                                                            (1, 10, True), (0, 10, False)])
def test_overlong_needs_a_buffer_inside_the_length(buffer_len: int, max_len: int, ok: bool) -> None:
    if ok:  # the last unpunished length is max_len - buffer_len; one more token costs factor / buffer_len
        expected = max_len - buffer_len
        assert grpo.overlong_penalty(expected, max_len=max_len, buffer_len=buffer_len, penalty_factor=3.0) == 0.0
        assert grpo.overlong_penalty(expected + 1, max_len=max_len, buffer_len=buffer_len,
                                     penalty_factor=3.0) == pytest.approx(-3.0 / buffer_len)
    else:
        with pytest.raises(ValueError, match="0 < buffer_len < max_len"):
            grpo.overlong_penalty(5, max_len=max_len, buffer_len=buffer_len, penalty_factor=1.0)


def test_a_zero_penalty_factor_punishes_nothing_and_gives_no_negative_zero() -> None:
    for length in (0, 8, 10, 50):
        value = grpo.overlong_penalty(length, max_len=10, buffer_len=4, penalty_factor=0.0)
        assert value == 0.0 and math.copysign(1.0, value) == 1.0
