"""Compare the estimators verl also has with verl's `core_algos` on random inputs.

Run by test_estimator_verl_parity.py with the python of the verl plugin's venv (verl pins
transformers<5.11, so it cannot live in our main env):

    <venv>/bin/python verl_estimator_parity.py

The estimators are imported from this checkout (its paths go first on sys.path). Each input is a
batch of B episodes of T response tokens: ragged, gappy masks (a gap is the context between two
model turns; some rows have no model token), groups of sizes 1 to 5 in shuffled order, outcomes
that are pass/fail (ties, groups whose rollouts all score the same) or continuous. verl gets the
outcome on the row's last model token (where its agent loop puts the score: the response ends on
a model token); our estimators get the same rows as episodes whose steps are the mask's runs.

| ours | verl |
|---|---|
| `grpo` (norm_by_std true / false) | `compute_grpo_outcome_advantage` |
| `dr_grpo` | `compute_grpo_outcome_advantage`, `norm_adv_by_std_in_grpo=False` |
| `rloo` | `compute_rloo_outcome_advantage` |
| `reinforce_plus_plus` (gamma 1, 0.9, 0.5) | `compute_reinforce_plus_plus_outcome_advantage`, `AlgoConfig(gamma)` |
| `reinforce_plus_plus_baseline` | `compute_reinforce_plus_plus_baseline_outcome_advantage` |
| `gae.gae_whitened` (gamma, lam: 1/1, 0.99/0.95, 0.9/0.5; random values and token rewards) | `compute_gae_advantage_return` |
| `gae.Gae` (the estimator, float32: outcomes on the last model token, groups of one)       | `compute_gae_advantage_return` |

Each is compared twice: the float64 math (to 1e-6 absolute) and the float32 arrays the estimator
returns (to 1e-6 absolute plus 1e-6 relative: float32's own rounding). One line is printed per
check; the exit status is 1 if any differs.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(REPO), str(REPO / "plugins" / "advantages")]

import attrs  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402

from beyondagent_core.advantages import AdvantageBatch, ScoredEpisode, Step  # noqa: E402
from beyondagent_core.types import Task  # noqa: E402
from beyondagent_plugin_advantages import gae, grpo, reinforce, rloo  # noqa: E402
from beyondagent_plugin_advantages.config import GaeConfig, ReinforcePlusPlusConfig  # noqa: E402

TOLERANCE = 1e-6
SEEDS = range(6)
SHAPES = [(4, 1), (6, 5), (16, 32), (12, 64)]  # (episodes B, response tokens T)
GAMMAS = (1.0, 0.9, 0.5)
GAE_SETTINGS = ((1.0, 1.0), (0.99, 0.95), (0.9, 0.5))  # (gamma, lam)

checks = 0
failures: list[str] = []
seen: Counter[str] = Counter()


def check(name: str, ours: np.ndarray, verls: torch.Tensor, *, rtol: float = 0.0) -> None:
    global checks
    checks += 1
    verls = verls.double().numpy()
    ours = np.asarray(ours, dtype=np.float64)
    same_shape = ours.shape == verls.shape
    diff = float(np.max(np.abs(ours - verls))) if same_shape and ours.size else 0.0
    ok = same_shape and bool(np.all(np.abs(ours - verls) <= TOLERANCE + rtol * np.abs(verls)))
    print(f"{'ok  ' if ok else 'FAIL'} {name}: max |ours - verl| = {diff:.1e}"
          + ("" if same_shape else f" (shapes {ours.shape} vs {verls.shape})"))
    if not ok:
        failures.append(name)


# ------------------------------------------------------------------------------------------------ inputs


def random_mask(gen: torch.Generator, batch: int, length: int) -> torch.Tensor:
    """Ragged rows (row 0 full, some maybe empty) with gaps inside: context between model turns."""
    lengths = torch.randint(0, length + 1, (batch,), generator=gen)
    lengths[0] = length
    mask = (torch.arange(length) < lengths.unsqueeze(-1)).double()
    mask *= (torch.rand(batch, length, generator=gen) > 0.25).double()
    mask[0, 0] = 1.0
    return mask


def random_groups(gen: torch.Generator, batch: int) -> list[str]:
    ids: list[str] = []
    while len(ids) < batch:
        ids += [f"task-{len(ids)}"] * int(torch.randint(1, 6, (1,), generator=gen))
    order = torch.randperm(batch, generator=gen).tolist()
    return [ids[:batch][i] for i in order]


def random_scores(gen: torch.Generator, batch: int, seed: int) -> torch.Tensor:
    if seed % 2:
        return (torch.rand(batch, generator=gen) > 0.5).double()  # pass/fail: ties, flat groups
    return torch.randn(batch, generator=gen, dtype=torch.float64)


def as_batch(mask: torch.Tensor, groups: list[str], scores: torch.Tensor) -> AdvantageBatch:
    """The rows as our estimators see them: each run of ones in a row's mask is a step."""
    episodes = []
    for row, group, score in zip(mask.tolist(), groups, scores.tolist()):
        steps, start = [], None
        for position, bit in enumerate([*row, 0.0]):
            if bit and start is None:
                start = position
            elif not bit and start is not None:
                steps.append(Step(start=start, end=position, observation="", action=""))
                start = None
        episodes.append(ScoredEpisode(group=group, task=Task(task_id=group), outcome=score, success=score > 0,
                                      length=len(row), steps=tuple(steps)))
    return AdvantageBatch(episodes=tuple(episodes))


def token_rewards(mask: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """verl's token-level rewards: the score on the row's last model token (the last token if it has none)."""
    batch, length = mask.shape
    rewards = torch.zeros(batch, length, dtype=torch.float64)
    for row in range(batch):
        ones = mask[row].nonzero()
        rewards[row, int(ones[-1]) if len(ones) else length - 1] = scores[row]
    return rewards


def per_token(values: np.ndarray, mask: torch.Tensor) -> np.ndarray:
    return values[:, None] * mask.numpy()


# ------------------------------------------------------------------------------------------------ checks


def check_batch(tag: str, mask: torch.Tensor, groups: list[str], scores: torch.Tensor) -> None:
    batch = as_batch(mask, groups, scores)
    rewards = token_rewards(mask, scores)
    index = np.array(groups, dtype=object)
    for norm in (True, False):
        verls, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=norm)
        check(f"{tag} grpo norm_by_std={norm}", per_token(grpo.episode_advantages(batch, norm_by_std=norm), mask),
              verls)
        check(f"{tag} grpo norm_by_std={norm} float32",
              np.stack(grpo.Grpo(grpo.GrpoConfig(norm_by_std=norm)).estimate(batch).per_token), verls, rtol=1e-6)
    verls, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=False)
    check(f"{tag} dr_grpo float32", np.stack(grpo.DrGrpo().estimate(batch).per_token), verls, rtol=1e-6)

    verls, _ = core_algos.compute_rloo_outcome_advantage(rewards, mask, index)
    check(f"{tag} rloo", per_token(rloo.episode_advantages(batch), mask), verls)
    check(f"{tag} rloo float32", np.stack(rloo.Rloo().estimate(batch).per_token), verls, rtol=1e-6)

    if mask.sum() < 2:  # verl's masked_var refuses (division by zero); ours gives 0
        check_too_few_tokens(tag, batch, rewards, mask, index)
        return
    for gamma in GAMMAS:
        verls, _ = core_algos.compute_reinforce_plus_plus_outcome_advantage(rewards, mask,
                                                                             config=AlgoConfig(gamma=gamma))
        check(f"{tag} reinforce_plus_plus gamma={gamma}", np.stack(reinforce.reinforce_plus_plus(batch, gamma)),
              verls)
        estimator = reinforce.ReinforcePlusPlus(ReinforcePlusPlusConfig(gamma=gamma))
        check(f"{tag} reinforce_plus_plus gamma={gamma} float32", np.stack(estimator.estimate(batch).per_token),
              verls, rtol=1e-6)
    verls, _ = core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(rewards, mask, index,
                                                                                  config=AlgoConfig())
    check(f"{tag} reinforce_plus_plus_baseline", np.stack(reinforce.reinforce_plus_plus_baseline(batch)), verls)
    check(f"{tag} reinforce_plus_plus_baseline float32",
          np.stack(reinforce.ReinforcePlusPlusBaseline().estimate(batch).per_token), verls, rtol=1e-6)
    sizes = Counter(groups).values()
    flat = sum(len({float(scores[i]) for i, g in enumerate(groups) if g == group}) == 1 and size > 1
               for group, size in Counter(groups).items())
    seen["groups of size 1"] += sum(size == 1 for size in sizes)
    seen["groups of size > 1"] += sum(size > 1 for size in sizes)
    seen["groups whose rollouts all score the same"] += flat
    seen["episodes without model tokens"] += int((mask.sum(-1) == 0).sum())


def check_too_few_tokens(tag: str, batch: AdvantageBatch, rewards: torch.Tensor, mask: torch.Tensor,
                         index: np.ndarray) -> None:
    """Fewer than 2 model tokens in the batch: verl raises ValueError; ours answers 0."""
    global checks
    for name, verl_fn, ours in (
        ("reinforce_plus_plus", lambda: core_algos.compute_reinforce_plus_plus_outcome_advantage(
            rewards, mask, config=AlgoConfig()), reinforce.reinforce_plus_plus(batch, 1.0)),
        ("reinforce_plus_plus_baseline", lambda: core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(
            rewards, mask, index, config=AlgoConfig()), reinforce.reinforce_plus_plus_baseline(batch)),
    ):
        checks += 1
        try:
            verl_fn()
            refused = False
        except ValueError:
            refused = True
        ok = refused and not np.any(np.stack(ours))
        print(f"{'ok  ' if ok else 'FAIL'} {tag} {name}: fewer than 2 model tokens, verl "
              f"{'refuses' if refused else 'answers'}, ours is {'0' if not np.any(np.stack(ours)) else 'not 0'}")
        if not ok:
            failures.append(f"{tag} {name}")
    seen["batches with fewer than 2 model tokens"] += 1


def check_gae(tag: str, gen: torch.Generator, mask: torch.Tensor) -> None:
    """GAE on the model tokens of a gappy multi-turn mask: random critic values, an outcome on each
    row's last model token plus small rewards on other tokens; advantages (whitened) and returns
    compared on the model tokens (the loss reads nothing else)."""
    if mask.sum() < 2:  # verl's whitening divides by (count - 1)
        return
    values = torch.randn(mask.shape, generator=gen, dtype=torch.float64)
    rewards = token_rewards(mask, torch.rand(mask.shape[0], generator=gen, dtype=torch.float64))
    rewards += 0.1 * torch.randn(mask.shape, generator=gen, dtype=torch.float64) * mask
    model = mask.numpy() > 0
    for gamma, lam in GAE_SETTINGS:
        verl_advantages, verl_returns = core_algos.compute_gae_advantage_return(
            rewards, values, mask, torch.tensor(gamma, dtype=torch.float64), torch.tensor(lam, dtype=torch.float64))
        advantages, returns = gae.gae_whitened(rewards.numpy(), values.numpy(), mask.numpy(), gamma=gamma, lam=lam)
        name = f"gae gamma={gamma} lam={lam} {tag}"
        check(f"{name} advantages", np.where(model, advantages, 0.0), torch.where(mask > 0, verl_advantages, 0.0))
        check(f"{name} returns", np.where(model, returns, 0.0), torch.where(mask > 0, verl_returns, 0.0))
    # the `gae` estimator (float32) as a backend calls it: the outcome on each row's last model token,
    # the critic's values on the episodes, PPO's groups of one
    scores = torch.rand(mask.shape[0], generator=gen, dtype=torch.float64)
    batch = as_batch(mask, [f"task-{row}" for row in range(mask.shape[0])], scores)
    batch = AdvantageBatch(episodes=tuple(attrs.evolve(episode, values=row) for episode, row
                                          in zip(batch.episodes, values.numpy())))
    for gamma, lam in GAE_SETTINGS:
        verl_advantages, verl_returns = core_algos.compute_gae_advantage_return(
            token_rewards(mask, scores), values, mask, torch.tensor(gamma, dtype=torch.float64),
            torch.tensor(lam, dtype=torch.float64))
        answer = gae.Gae(GaeConfig(gamma=gamma, lam=lam)).estimate(batch)
        name = f"gae gamma={gamma} lam={lam} {tag} estimator float32"
        check(f"{name} advantages", np.stack(answer.per_token), torch.where(mask > 0, verl_advantages, 0.0), rtol=1e-6)
        check(f"{name} returns", np.stack(answer.returns), torch.where(mask > 0, verl_returns, 0.0), rtol=1e-6)
    seen["gae batches"] += 1


def main() -> int:
    import verl

    print(f"verl {verl.__version__} from {Path(core_algos.__file__).parent}; estimators from {REPO}")
    for seed in SEEDS:
        for batch, length in SHAPES:
            gen = torch.Generator().manual_seed(seed * 1000 + batch * 10 + length)
            mask = random_mask(gen, batch, length)
            check_batch(f"seed={seed} B={batch} T={length}", mask, random_groups(gen, batch),
                        random_scores(gen, batch, seed))
            check_gae(f"seed={seed} B={batch} T={length}", gen, mask)
    # two fixed batches: every outcome equal (verl's epsilons leave ~1e-4 * r / N; ours too), one model token
    check_batch("all equal", torch.ones(4, 6, dtype=torch.float64), ["a", "a", "b", "b"],
                torch.ones(4, dtype=torch.float64))
    check_batch("one model token", torch.tensor([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]], dtype=torch.float64),
                ["a", "a", "b"], torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64))
    print("covered: " + ", ".join(f"{name} {count}" for name, count in sorted(seen.items())))
    for name in ("groups of size 1", "groups of size > 1", "groups whose rollouts all score the same",
                 "episodes without model tokens", "batches with fewer than 2 model tokens", "gae batches"):
        if not seen[name]:
            failures.append(f"no input had {name}")
            print(f"FAIL coverage: no input had {name}")
    print(f"{checks} checks, {len(failures)} mismatches (tolerance {TOLERANCE})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
