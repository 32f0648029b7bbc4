"""Compare `beyondagent_plugin_torch/grpo.py` with verl's `core_algos` on random inputs.

Run by test_grpo_parity.py with the python of a venv that has verl (verl pins transformers<5.11, so it cannot
live in our main env):

    <venv>/bin/python verl_parity.py [path/to/grpo.py]

grpo.py is loaded by file path, so beyondagent need not be installed there. Inputs are float64, drawn for
several seeds and shapes: ragged and gappy masks (some rows empty), groups of sizes 1 to 5, advantages of both
signs, and log-ratios up to +-40 so that clipping, dual clipping and verl's clamps all trigger. GSPO's loss
(`gspo_policy_loss`, verl's "gspo") is compared on the same kinds of inputs. One line is
printed per check; the exit status is 1 if any differs from verl by more than 1e-6.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import numpy as np
import torch
import verl
import verl.utils.torch_functional as verl_F
from verl.trainer.ppo import core_algos
from verl.workers.config.actor import ActorConfig

TOLERANCE = 1e-6
SEEDS = range(5)
SHAPES = [(4, 1), (8, 7), (16, 32), (12, 64)]  # (sequences B, response tokens T)
CLIP_SETTINGS = [  # (clip_ratio, clip_ratio_low, clip_ratio_high, clip_ratio_c)
    (0.2, None, None, 3.0),
    (0.2, 0.2, 0.28, 3.0),
    (0.1, 0.3, None, 10.0),
]
DEFAULT_GRPO = Path(__file__).resolve().parents[1] / "beyondagent_plugin_torch" / "grpo.py"

checks = 0
failures: list[str] = []
seen: Counter[str] = Counter()  # how often the edge cases came up, printed at the end


def load_grpo(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("grpo_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def check(name: str, ours: torch.Tensor | float, verls: torch.Tensor | float) -> None:
    global checks
    checks += 1
    ours, verls = torch.as_tensor(ours, dtype=torch.float64), torch.as_tensor(verls, dtype=torch.float64)
    same_shape = ours.shape == verls.shape
    same_nan = same_shape and bool(torch.equal(ours.isnan(), verls.isnan()))
    diff = (ours - verls).nan_to_num().abs().max().item() if same_shape and ours.numel() else 0.0
    ok = same_shape and same_nan and diff <= TOLERANCE
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max |ours - verl| = {diff:.1e}"
          + ("" if same_shape else f" (shapes {tuple(ours.shape)} vs {tuple(verls.shape)})"))
    if not ok:
        failures.append(name)


# ------------------------------------------------------------------------------------------------ inputs


def random_mask(gen: torch.Generator, batch: int, length: int, gappy: bool) -> torch.Tensor:
    """Right-padded ragged lengths (row 0 full, maybe some empty rows); `gappy` also masks tokens inside."""
    lengths = torch.randint(0, length + 1, (batch,), generator=gen)
    lengths[0] = length
    mask = (torch.arange(length) < lengths.unsqueeze(-1)).double()
    if gappy:
        mask *= (torch.rand(batch, length, generator=gen) > 0.3).double()
        mask[0, 0] = 1.0
    return mask


def random_groups(gen: torch.Generator, batch: int) -> np.ndarray:
    """Group ids (uid strings, as verl uses) for groups of sizes 1 to 5 in shuffled order."""
    ids: list[str] = []
    while len(ids) < batch:
        size = int(torch.randint(1, 6, (1,), generator=gen))
        ids += [f"task-{len(ids)}"] * size
    ids = ids[:batch]
    order = torch.randperm(batch, generator=gen).tolist()
    return np.array([ids[i] for i in order], dtype=object)


def random_scores(gen: torch.Generator, batch: int, seed: int) -> torch.Tensor:
    if seed % 2:
        return (torch.rand(batch, generator=gen) > 0.5).double()  # pass/fail rewards: some groups all equal
    return torch.randn(batch, generator=gen, dtype=torch.float64)


def random_log_probs(gen: torch.Generator, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Old and new log-probs whose differences span small (inside the clip range) to +-40 (past the clamps)."""
    old = -3 * torch.rand(batch, length, generator=gen, dtype=torch.float64)
    scale = torch.tensor([0.05, 0.3, 1.5, 40.0], dtype=torch.float64)[torch.randint(0, 4, (batch, length),
                                                                                   generator=gen)]
    return old, old + scale * torch.randn(batch, length, generator=gen, dtype=torch.float64)


def actor_config(clip: tuple) -> ActorConfig:
    """Built the way verl's own policy-loss tests build it."""
    ratio, low, high, c = clip
    return ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=ratio,
                       clip_ratio_low=low, clip_ratio_high=high, clip_ratio_c=c)


# ------------------------------------------------------------------------------------------------ checks


def check_advantages(grpo: ModuleType, tag: str, gen: torch.Generator, seed: int, mask: torch.Tensor) -> None:
    batch, length = mask.shape
    ids = random_groups(gen, batch)
    scores = random_scores(gen, batch, seed)
    token_rewards = torch.zeros(batch, length, dtype=torch.float64)
    token_rewards[:, -1] = scores  # verl sums the row, so where the score sits does not matter
    for norm in (True, False):
        verls, _ = core_algos.compute_grpo_outcome_advantage(token_rewards, mask, ids, norm_adv_by_std_in_grpo=norm)
        ours = grpo.token_advantages(grpo.group_advantages(scores, list(ids), norm_by_std=norm), mask)
        check(f"{tag} grpo advantages norm_by_std={norm}", ours, verls)
    sizes = Counter(ids.tolist()).values()
    seen["groups of size 1"] += sum(size == 1 for size in sizes)
    seen["groups of size > 1"] += sum(size > 1 for size in sizes)
    seen["rows without response tokens"] += int((mask.sum(-1) == 0).sum())


def check_policy_loss(grpo: ModuleType, tag: str, gen: torch.Generator, mask: torch.Tensor) -> None:
    batch, length = mask.shape
    old, new = random_log_probs(gen, batch, length)
    per_sequence = torch.randn(batch, 1, generator=gen, dtype=torch.float64) * mask
    per_token = torch.randn(batch, length, generator=gen, dtype=torch.float64) * mask
    for clip, mode, (adv_kind, advantages) in itertools.product(
        CLIP_SETTINGS, grpo.LOSS_AGG_MODES, [("per-sequence", per_sequence), ("per-token", per_token)]
    ):
        name = f"{tag} policy_loss clip={clip} {mode} A {adv_kind}"
        ratio, low, high, c = clip
        config = actor_config(clip)
        verl_new = new.clone().requires_grad_()
        verl_loss, metrics = core_algos.compute_policy_loss_vanilla(old, verl_new, advantages, mask, mode, config)
        verl_loss.backward()
        our_new = new.clone().requires_grad_()
        ours = grpo.policy_loss(old, our_new, advantages, mask, clip_ratio=ratio, clip_ratio_low=low,
                                clip_ratio_high=high, clip_ratio_c=c, loss_agg_mode=mode)
        ours.loss.backward()
        check(f"{name} loss", ours.loss, verl_loss)
        check(f"{name} d loss / d log_prob", our_new.grad, verl_new.grad)
        check(f"{name} clip_fraction", ours.clip_fraction, metrics["actor/pg_clipfrac"])
        check(f"{name} dual_clip_fraction", ours.dual_clip_fraction, metrics["actor/pg_clipfrac_lower"])
        check(f"{name} approx_kl", ours.approx_kl, metrics["actor/ppo_kl"])
        seen["policy losses with clipped tokens"] += bool(metrics["actor/pg_clipfrac"] > 0)
        seen["policy losses with dual-clipped tokens"] += bool(metrics["actor/pg_clipfrac_lower"] > 0)
        seen["policy losses with a log-ratio past the +-20 clamp"] += bool(((new - old).abs() * mask > 20).any())
    # verl's trainer hands the mini-batch's counts to each micro-batch through config.global_batch_info
    for mode in grpo.LOSS_AGG_MODES:
        config = actor_config(CLIP_SETTINGS[0])
        normalizer = grpo.loss_normalizer(mask, mode)
        key = "batch_num_tokens" if mode == "token-mean" else "global_batch_size"
        config.global_batch_info.update({key: normalizer, "loss_scale_factor": 100})
        rows = slice(0, max(1, batch // 2))
        args = (old[rows], new[rows], per_sequence[rows], mask[rows])
        verl_loss, _ = core_algos.compute_policy_loss_vanilla(*args, mode, config)
        ours = grpo.policy_loss(*args, loss_agg_mode=mode, normalizer=normalizer, loss_scale_factor=100)
        check(f"{tag} policy_loss {mode} micro-batch with the mini-batch's count", ours.loss, verl_loss)


def check_gspo_loss(grpo: ModuleType, tag: str, gen: torch.Generator, mask: torch.Tensor) -> None:
    """`gspo_policy_loss` against verl's "gspo" policy loss: loss, gradient and metrics."""
    batch, length = mask.shape
    old, new = random_log_probs(gen, batch, length)
    new = old + (new - old) / 4  # sequence means inside verl's clamp at 10 ...
    new[3::4] += 12.0  # ... but every fourth row's, past it
    per_sequence = torch.randn(batch, 1, generator=gen, dtype=torch.float64) * mask
    per_token = torch.randn(batch, length, generator=gen, dtype=torch.float64) * mask
    for clip, mode, (adv_kind, advantages) in itertools.product(
        CLIP_SETTINGS, grpo.LOSS_AGG_MODES, [("per-sequence", per_sequence), ("per-token", per_token)]
    ):
        name = f"{tag} gspo clip={clip} {mode} A {adv_kind}"
        ratio, low, high, _ = clip
        verl_new = new.clone().requires_grad_()
        verl_loss, metrics = core_algos.compute_policy_loss_gspo(old, verl_new, advantages, mask, mode,
                                                                 actor_config(clip))
        verl_loss.backward()
        our_new = new.clone().requires_grad_()
        ours = grpo.gspo_policy_loss(old, our_new, advantages, mask, clip_ratio=ratio, clip_ratio_low=low,
                                     clip_ratio_high=high, loss_agg_mode=mode)
        ours.loss.backward()
        check(f"{name} loss", ours.loss, verl_loss)
        check(f"{name} d loss / d log_prob", our_new.grad, verl_new.grad)
        check(f"{name} clip_fraction", ours.clip_fraction, metrics["actor/pg_clipfrac"])
        check(f"{name} dual_clip_fraction", ours.dual_clip_fraction, metrics["actor/pg_clipfrac_lower"])
        check(f"{name} approx_kl", ours.approx_kl, metrics["actor/ppo_kl"])
        seen["gspo losses with clipped sequences"] += bool(metrics["actor/pg_clipfrac"] > 0)
    lengths = mask.sum(-1).clamp(min=1)
    seen["gspo rows past the clamp at 10"] += int((((new - old) * mask).sum(-1) / lengths > 10).sum())


def check_kl(grpo: ModuleType, tag: str, gen: torch.Generator, mask: torch.Tensor) -> None:
    ref, policy = random_log_probs(gen, *mask.shape)
    for kind in grpo.KL_TYPES:
        verl_policy, our_policy = policy.clone().requires_grad_(), policy.clone().requires_grad_()
        verls = core_algos.kl_penalty(verl_policy, ref, kind)
        ours = grpo.kl_penalty(our_policy, ref, kind)
        (verls * mask).sum().backward()
        (ours * mask).sum().backward()
        check(f"{tag} kl_penalty {kind}", ours, verls)
        check(f"{tag} kl_penalty {kind} gradient", our_policy.grad, verl_policy.grad)
    seen["KL pairs past the low_var_kl clamp"] += int((core_algos.kl_penalty(policy, ref, "low_var_kl") >= 10).sum())


def check_aggregation(grpo: ModuleType, tag: str, gen: torch.Generator, mask: torch.Tensor) -> None:
    values = torch.randn(*mask.shape, generator=gen, dtype=torch.float64) * 3
    batch = mask.shape[0]
    micro_batches = [slice(start, start + 3) for start in range(0, batch, 3)]
    for mode in grpo.LOSS_AGG_MODES:
        check(f"{tag} agg_loss {mode}", grpo.aggregate(values, mask, mode), core_algos.agg_loss(values, mask, mode))
        normalizer = grpo.loss_normalizer(mask, mode)
        counts = {"batch_num_tokens": normalizer} if mode == "token-mean" else {"global_batch_size": normalizer}
        verl_micro = sum(core_algos.agg_loss(values[rows], mask[rows], mode, **counts, loss_scale_factor=50)
                         for rows in micro_batches)
        our_micro = sum(grpo.aggregate(values[rows], mask[rows], mode, normalizer=normalizer, loss_scale_factor=50)
                        for rows in micro_batches)
        check(f"{tag} agg_loss {mode} summed over micro-batches of 3", our_micro, verl_micro)
        full = core_algos.agg_loss(values, mask, mode, loss_scale_factor=50)
        check(f"{tag} agg_loss {mode} micro-batch sum == verl's full batch", our_micro, full)


def check_log_probs(grpo: ModuleType, tag: str, gen: torch.Generator, mask: torch.Tensor) -> None:
    vocab = 50
    logits = 4 * torch.randn(*mask.shape, vocab, generator=gen, dtype=torch.float64)
    labels = torch.randint(0, vocab, mask.shape, generator=gen)
    for temperature in (1.0, 0.6):
        scaled = logits / temperature  # what verl's actor does before calling these
        check(f"{tag} log_probs temperature={temperature}", grpo.log_probs_from_logits(logits, labels, temperature),
              verl_F.logprobs_from_logits(scaled, labels))
        check(f"{tag} entropy temperature={temperature}", grpo.entropy_from_logits(logits, temperature),
              verl_F.entropy_from_logits(scaled))


def main() -> int:
    grpo = load_grpo(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_GRPO)
    print(f"verl {verl.__version__} (core_algos at {core_algos.__file__}), torch {torch.__version__}; "
          f"ours: {grpo.__file__}")
    for seed, (batch, length) in itertools.product(SEEDS, SHAPES):
        gen = torch.Generator().manual_seed(seed * 1000 + batch * 10 + length)
        mask = random_mask(gen, batch, length, gappy=seed % 2 == 1)
        tag = f"[seed {seed} B={batch} T={length}]"
        check_advantages(grpo, tag, gen, seed, mask)
        check_policy_loss(grpo, tag, gen, mask)
        check_gspo_loss(grpo, tag, gen, mask)
        check_kl(grpo, tag, gen, mask)
        check_aggregation(grpo, tag, gen, mask)
        check_log_probs(grpo, tag, gen, mask)
    print("edge cases covered: " + ", ".join(f"{name}: {count}" for name, count in seen.items()))
    print(f"{checks} checks, {len(failures)} mismatches (tolerance {TOLERANCE})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
