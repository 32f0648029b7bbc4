"""The GRPO update (update.py) on the tiny model, against values worked out by hand, for what the other update
tests leave open: the loss the update reports when every token's ratio is known (rows whose old policy is
their recorded log-probs: off-policy rows), under each aggregation mode, with mini-batches (each normalized by
its own tokens), the lower clip (`clip_ratio`, `clip_ratio_low`) and the off-policy clips; the truncated
importance weights multiplying the loss under a non-default `tis_cap`; `grad_clip` bounding the step the
optimizer takes (both sides of the clip); a non-finite gradient skipping the step; the single-step shortcut and
the shuffle exactly at `mini_batch_size` = the batch and one below; `kl_coef`, `kl_type` and `entropy_coeff`
reaching the loss with their values and signs; and the token-weighted metrics (`_Totals`, `mean_abs_gap`),
the importance-weight cap's strict comparison exactly on the cap.

The model is loaded once for the module; every update that moves weights runs on a copy.
"""

from __future__ import annotations

import copy
import math

import attrs
import pytest
import torch
from beyondagent_plugin_torch import grpo
from beyondagent_plugin_torch.config import TorchConfig
from beyondagent_plugin_torch.update import _Totals, forward_logprobs, grpo_update, make_batch, mean_abs_gap
from test_update import episodes_for
from tiny_and_real import loaded_policy

from beyondagent_core.spec import AlgorithmSection

pytestmark = pytest.mark.beyondagent_plugins("torch")

ROWS = 8
ADVANTAGES = torch.tensor([1.0, -1.0, 0.5, -2.0, 1.5, -0.5, 2.0, -1.5])
# each row's ratio of the current policy over the recorded (old) one; none sits on a clip bound or a cap
RATIOS = [1.1, 0.5, 4.0, 0.9, 0.3, 1.8, 1.0, 0.7]


@pytest.fixture(scope="module")
def tiny() -> tuple[torch.nn.Module, torch.Tensor, object]:
    """(the shared tiny model, the current log-probs of the batch's tokens, the batch)."""
    model, tokenizer = loaded_policy("tiny")
    episodes, _ = episodes_for(tokenizer, ROWS)
    batch = make_batch(episodes, ADVANTAGES, pad_token_id=tokenizer.pad_token_id, device=torch.device("cpu"))
    with torch.no_grad():
        current, _ = forward_logprobs(model, batch, 1.0)
    return model, current, batch


def rigged(batch, current: torch.Tensor, *, off_policy: bool) -> object:
    """The batch with recorded log-probs log p - ln r (each row's ratio r); all rows off-policy or none."""
    recorded = (current - torch.tensor([math.log(r) for r in RATIOS])[:, None]) * batch.loss_mask
    return attrs.evolve(batch, rollout_logprobs=recorded, off_policy=torch.full((ROWS,), off_policy))


def update(model, batch, *, algorithm=None, lr: float = 0.0, ref=None, generator=None, **settings) -> dict:
    config = {k: settings.pop(k) for k in ("micro_batch_size", "mini_batch_size", "ppo_epochs", "grad_clip")
              if k in settings}
    metrics = grpo_update(model, ref, torch.optim.SGD(model.parameters(), lr=lr), batch,
                          algorithm=algorithm or AlgorithmSection(kl_coef=0.0), config=TorchConfig(**config),
                          temperature=1.0, generator=generator or torch.Generator().manual_seed(0), **settings)
    model.zero_grad(set_to_none=True)  # the shared model keeps no gradient of ours
    return metrics


def vanilla(ratio: float, advantage: float, low: float, high: float, dual: float) -> float:
    """One token's PPO loss by hand (the formula of grpo.policy_loss)."""
    loss = max(-advantage * ratio, -advantage * min(max(ratio, 1 - low), 1 + high))
    return min(loss, -advantage * dual) if advantage < 0 else loss


def clipped(ratio: float, advantage: float, low: float, high: float) -> bool:
    """Whether the clipped term set the token's loss (what `clip_fraction` counts)."""
    return -advantage * min(max(ratio, 1 - low), 1 + high) > -advantage * ratio


def tokens(batch) -> list[float]:
    return batch.loss_mask.sum(-1).tolist()


# ------------------------------------------------------------------------------- the loss, token by token


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_the_reported_loss_by_hand_in_each_aggregation_mode(tiny, mode: str) -> None:
    # off-policy rows: the old policy is the recorded one, so each row's ratio is RATIOS[row]; their clips are
    # the off-policy ones (upper 0.6, dual 3), the lower one the algorithm's clip_ratio 0.2
    model, current, batch = tiny
    batch = rigged(batch, current, off_policy=True)
    n = tokens(batch)
    per_row = [vanilla(r, float(a), 0.2, 0.6, 3.0) for r, a in zip(RATIOS, ADVANTAGES)]
    expected = {
        "token-mean": sum(k * loss for k, loss in zip(n, per_row)) / sum(n),
        "seq-mean-token-sum": sum(k * loss for k, loss in zip(n, per_row)) / ROWS,
        "seq-mean-token-mean": sum(per_row) / ROWS,
        # divided by the whole batch's width (not each micro-batch's own, narrower, one)
        "seq-mean-token-sum-norm": sum(k * loss for k, loss in zip(n, per_row)) / ROWS / batch.loss_mask.shape[1],
    }[mode]
    metrics = update(model, batch, algorithm=AlgorithmSection(kl_coef=0.0, loss_agg_mode=mode), micro_batch_size=3,
                     off_policy_clip=(0.6, 3.0))
    assert metrics["actor/pg_loss"] == pytest.approx(expected, rel=1e-4)
    # rows 1 and 7 (A < 0 below 0.8) and 2 (A > 0 above 1.6) clipped
    flags = [clipped(r, float(a), 0.2, 0.6) for r, a in zip(RATIOS, ADVANTAGES)]
    assert flags == [False, True, True, False, False, False, False, True]
    assert metrics["actor/clip_fraction"] == pytest.approx(sum(k for k, f in zip(n, flags) if f) / sum(n), rel=1e-4)


@pytest.mark.parametrize(("clips", "low", "high", "dual"), [
    # the lower clip moves with clip_ratio (0.4: row 1 is no longer clipped, row 4 is); no dual clip binds
    ({"clip_ratio": 0.6}, 0.6, 0.6, 3.0),
    # clip_ratio_low 0.75 (0.25: rows 1 and 7 no longer clipped); the off-policy clips upper 1.5 (row 5's 1.8
    # inside 2.5) and dual 1.5: row 5 (A = -0.5) held at 0.75
    ({"clip_ratio_low": 0.75}, 0.75, 1.5, 1.5),
])
def test_the_lower_clip_and_the_off_policy_clips_reach_the_rows(tiny, clips, low, high, dual) -> None:
    model, current, batch = tiny
    batch = rigged(batch, current, off_policy=True)
    n = tokens(batch)
    per_row = [vanilla(r, float(a), low, high, dual) for r, a in zip(RATIOS, ADVANTAGES)]
    metrics = update(model, batch, algorithm=AlgorithmSection(kl_coef=0.0, **clips), micro_batch_size=8,
                     off_policy_clip=(high, dual))
    assert metrics["actor/pg_loss"] == pytest.approx(sum(k * v for k, v in zip(n, per_row)) / sum(n), rel=1e-4)
    assert metrics["actor/dual_clip_fraction"] == pytest.approx(n[5] / sum(n) if dual == 1.5 else 0.0, rel=1e-4)


def test_each_mini_batch_is_normalized_by_its_own_tokens(tiny) -> None:
    # two mini-batches of 4 rows (shuffled with the update's generator): the reported loss is the mean of the
    # two mini-batches' token-means
    model, current, batch = tiny
    batch = rigged(batch, current, off_policy=True)
    n = tokens(batch)
    per_row = [vanilla(r, float(a), 0.2, 0.6, 3.0) for r, a in zip(RATIOS, ADVANTAGES)]
    order = torch.randperm(ROWS, generator=torch.Generator().manual_seed(5)).tolist()
    minis = [order[:4], order[4:]]
    expected = sum(sum(n[i] * per_row[i] for i in mini) / sum(n[i] for i in mini) for mini in minis) / 2
    metrics = update(model, batch, micro_batch_size=3, mini_batch_size=4, off_policy_clip=(0.6, 3.0),
                     generator=torch.Generator().manual_seed(5))
    assert metrics["actor/pg_loss"] == pytest.approx(expected, rel=1e-4)
    whole = sum(k * v for k, v in zip(n, per_row)) / sum(n)
    assert abs(expected - whole) > 1e-3  # (mini-batch normalization is not the whole batch's: the check bites)


def test_a_non_default_tis_cap_weighs_each_tokens_loss(tiny) -> None:
    # on-policy rows, one optimizer step: ratio 1, so each token's loss is -A w with w = min(r, cap), r being
    # the trainer's policy over the recorded one (RATIOS); row 2 (r = 4) takes the cap, 3 or 2
    model, current, batch = tiny
    batch = rigged(batch, current, off_policy=False)
    n = tokens(batch)
    for cap in (3.0,):  # (the default cap 2 is test_update.py's)
        weights = [min(r, cap) for r in RATIOS]
        expected = sum(k * -float(a) * w for k, a, w in zip(n, ADVANTAGES, weights)) / sum(n)
        metrics = update(model, batch, micro_batch_size=8, tis_cap=cap)
        assert metrics["actor/pg_loss"] == pytest.approx(expected, rel=1e-4), cap
        assert metrics["rollout_corr/rollout_is_mean"] == pytest.approx(sum(k * w for k, w in zip(n, weights)) / sum(n),
                                                                       rel=1e-4)
        # above the cap: row 2 only, under either cap
        assert metrics["rollout_corr/rollout_is_ratio_fraction_high"] == pytest.approx(n[2] / sum(n), rel=1e-4)
    plain = update(model, batch, micro_batch_size=8)  # no cap given: no weights, no weight metrics
    assert plain["actor/pg_loss"] == pytest.approx(sum(k * -float(a) for k, a in zip(n, ADVANTAGES)) / sum(n), rel=1e-4)
    assert "rollout_corr/rollout_is_mean" not in plain


# ------------------------------------------------------------------------------------------ the optimizer


def moved(model, before: dict[str, torch.Tensor]) -> float:
    return math.sqrt(sum(float((p.detach() - before[name]).double().square().sum())
                         for name, p in model.named_parameters()))


def test_grad_clip_bounds_the_step_on_both_sides(tiny) -> None:
    # SGD with lr 1 moves the weights by exactly the clipped gradient: its norm is grad_clip when the
    # gradient is longer, and the gradient's own norm (the metric, taken before clipping) when it is shorter
    model, _, batch = tiny
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for grad_clip in (1e-3, 1e6):
        policy = copy.deepcopy(model)
        metrics = update(policy, batch, lr=1.0, micro_batch_size=8, grad_clip=grad_clip)
        norm = metrics["actor/grad_norm"]
        assert norm > 1e-3
        assert moved(policy, before) == pytest.approx(min(norm, grad_clip), rel=1e-2), grad_clip


def test_a_non_finite_gradient_skips_the_optimizer_step(tiny) -> None:
    model, _, batch = tiny
    poisoned = attrs.evolve(batch, advantages=batch.advantages.clone())
    poisoned.advantages[3, poisoned.loss_mask[3].bool()] = float("nan")
    policy = copy.deepcopy(model)
    before = {name: p.detach().clone() for name, p in policy.named_parameters()}
    metrics = update(policy, poisoned, lr=1.0, micro_batch_size=8)
    assert metrics["actor/skipped_steps"] == 1.0 and not math.isfinite(metrics["actor/grad_norm"])
    assert moved(policy, before) == 0.0


def rows_through(model) -> list[int]:
    sizes: list[int] = []
    model.register_forward_pre_hook(lambda module, args, kwargs: sizes.append(kwargs["input_ids"].shape[0]),
                                    with_kwargs=True)
    return sizes


@pytest.mark.parametrize(("mini", "epochs", "old_forward", "shuffled"), [
    (ROWS, 1, False, False),  # one optimizer step: the old log-probs are the current ones, in batch order
    (ROWS - 1, 1, True, True),  # one row short: two steps, the old policy recomputed first, rows shuffled
    (ROWS, 2, True, True),  # two epochs of one mini-batch
])
def test_the_single_step_shortcut_exactly_at_the_batch_size(tiny, mini, epochs, old_forward, shuffled) -> None:
    model, _, batch = tiny
    policy = copy.deepcopy(model)
    sizes = rows_through(policy)
    generator = torch.Generator().manual_seed(0)
    state = generator.get_state()
    update(policy, batch, micro_batch_size=8, mini_batch_size=mini, ppo_epochs=epochs, generator=generator)
    assert sum(sizes) == ROWS * epochs + (ROWS if old_forward else 0)
    assert (not torch.equal(generator.get_state(), state)) == shuffled


# ------------------------------------------------------------------------------------------ KL and entropy


@pytest.fixture(scope="module")
def reference(tiny) -> torch.nn.Module:
    """A reference a few updates away from the policy: the KL and its gradient are not 0."""
    reference = copy.deepcopy(tiny[0]).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    return reference


def test_kl_type_and_kl_coef_reach_the_loss(tiny, reference) -> None:
    model, current, batch = tiny
    flat = attrs.evolve(batch, advantages=torch.zeros_like(batch.advantages))  # the KL alone moves the weights
    with torch.no_grad():
        ref_logprobs, _ = forward_logprobs(reference, batch, 1.0)
    mask = batch.loss_mask
    norms = []
    for coef in (0.5, 1.0):
        metrics = update(model, flat, ref=reference, micro_batch_size=8,
                         algorithm=AlgorithmSection(kl_coef=coef, kl_type="mse"))
        expected = float((grpo.kl_penalty(current, ref_logprobs, "mse") * mask).sum() / mask.sum())
        assert metrics["actor/kl"] == pytest.approx(expected, rel=1e-4)  # mse, not the default low_var_kl
        assert metrics["actor/flat_samples_skipped"] == 0  # with a KL every row trains
        norms.append(metrics["actor/grad_norm"])
    assert norms[1] == pytest.approx(2 * norms[0], rel=1e-4)  # the gradient is kl_coef times the KL's
    # the sign: one small step brings the policy closer to the reference
    policy = copy.deepcopy(model)
    update(policy, flat, ref=reference, lr=1e-2, micro_batch_size=8, algorithm=AlgorithmSection(kl_coef=1.0,
                                                                                                kl_type="mse"))
    with torch.no_grad():
        after, _ = forward_logprobs(policy, batch, 1.0)
    kl = lambda lp: float((grpo.kl_penalty(lp, ref_logprobs, "mse") * mask).sum())  # noqa: E731
    assert kl(after) < kl(current)


def test_a_reference_without_kl_coef_leaves_flat_rows_skipped(tiny, reference) -> None:
    model, _, batch = tiny
    some_flat = attrs.evolve(batch, advantages=batch.advantages * (torch.arange(ROWS) % 2 == 0)[:, None])
    metrics = update(model, some_flat, ref=reference, micro_batch_size=8, algorithm=AlgorithmSection(kl_coef=0.0))
    assert metrics["actor/flat_samples_skipped"] == ROWS // 2 and "actor/kl" not in metrics


def test_entropy_coeff_reaches_the_loss_with_its_value_and_sign(tiny) -> None:
    model, _, batch = tiny
    flat = attrs.evolve(batch, advantages=torch.zeros_like(batch.advantages))
    norms = [update(model, flat, micro_batch_size=8, algorithm=AlgorithmSection(kl_coef=0.0, entropy_coeff=c))
             ["actor/grad_norm"] for c in (0.01, 0.02)]
    assert norms[0] > 0 and norms[1] == pytest.approx(2 * norms[0], rel=1e-4)
    policy = copy.deepcopy(model)
    update(policy, flat, lr=10.0, micro_batch_size=8, algorithm=AlgorithmSection(kl_coef=0.0, entropy_coeff=0.1))

    def entropy(m) -> float:
        with torch.no_grad():
            _, values = forward_logprobs(m, batch, 1.0, with_entropy=True)
        return float((values * batch.loss_mask).sum())

    assert entropy(policy) > entropy(model)  # a bonus: the step raises the entropy


# ----------------------------------------------------------------------------------------------- metrics


def test_the_importance_weight_cap_counts_only_ratios_strictly_above_it() -> None:
    totals = _Totals()
    log_ratio = torch.tensor([[math.log(2.0), math.log(2.0) + 1e-9, 0.0, 5.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    totals.add_is_weights(torch.tensor([[2.0, 2.0, 1.0, 9.0]]), log_ratio, mask, cap=2.0)
    metrics = totals.metrics()
    # on the cap: not above; just past it: above; the masked token counts nowhere
    assert metrics["rollout_corr/rollout_is_ratio_fraction_high"] == pytest.approx(1 / 3)
    assert metrics["rollout_corr/rollout_is_mean"] == pytest.approx(5 / 3)


def test_the_metrics_weigh_micro_batches_by_their_tokens() -> None:
    from beyondagent_plugin_torch.grpo import PolicyLoss

    def policy(loss: float, clip: float, dual: float) -> PolicyLoss:
        return PolicyLoss(torch.tensor(loss), torch.tensor(clip), torch.tensor(dual), torch.tensor(0.0))

    totals = _Totals()
    totals.add_micro(torch.ones(1, 3), policy(1.0, 1.0, 0.0), torch.full((1, 3), 2.0), None)
    totals.add_micro(torch.ones(1, 1), policy(2.0, 0.0, 1.0), torch.full((1, 1), 6.0), torch.full((1, 1), 0.5))
    totals.add_micro(torch.zeros(1, 2), policy(7.0, 1.0, 1.0), torch.full((1, 2), 9.0), None)  # no tokens: nothing
    totals.grad_norms = [1.0, 3.0]
    metrics = totals.metrics()
    assert metrics["actor/clip_fraction"] == pytest.approx(3 / 4) and metrics["actor/dual_clip_fraction"] == 0.25
    assert metrics["actor/entropy"] == pytest.approx((3 * 2 + 6) / 4)
    assert metrics["actor/kl"] == pytest.approx(0.5 / 4)
    assert metrics["actor/pg_loss"] == pytest.approx(3.0 / 2) and metrics["actor/grad_norm"] == 2.0
    empty = _Totals().metrics()
    assert "actor/clip_fraction" not in empty and "actor/kl" not in empty and empty["actor/pg_loss"] == 0.0


def test_the_log_prob_gap_leaves_out_masked_and_non_finite_tokens() -> None:
    rollout = torch.tensor([[-1.0, -2.0, float("-inf"), -4.0]])
    trainer = torch.tensor([[-1.5, -1.0, -3.0, 0.0]])
    assert mean_abs_gap(rollout, trainer, torch.tensor([[1.0, 1.0, 1.0, 0.0]])) == pytest.approx(0.75)
    assert math.isnan(mean_abs_gap(rollout, trainer, torch.zeros(1, 4)))
