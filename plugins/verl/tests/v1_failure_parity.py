"""verl's V1 trainer, behind our group gate, gives failed episodes' siblings the advantages ours does.

Run by test_v1_failed_episodes.py with the python of the verl plugin's venv:

    <venv>/bin/python v1_failure_parity.py

In verl's asynchronous (V1) trainers verl's own estimators compute the advantages over the sessions
of a prompt that reached its replay buffer. Our agent loop's gate (`group_gate.py`) returns no
output for a failed episode and response mask 0 for the finished ones of a group failures left
without a baseline. This script applies exactly that to random batches with failures, hands the
rest to verl's `compute_advantage_for_multi_trajectories` (what `colocate_async` calls, keys
`{uid}_{session}_0`) and compares the trained tokens' advantages with our
`advantages.estimate_finished` on the whole batch — for every estimator verl has (grpo with and
without std, rloo, reinforce_plus_plus, reinforce_plus_plus_baseline). It also checks the gate is
needed: verl over the ungated batch differs from ours (a failed episode's 0 in its group's mean).
Then our agent loop's own `run` (verl's `AgentLoopOutput`s, its `episode` replaced by canned episodes:
no model here) is run for a group's sessions at once, one of them raising: the failed ones return
no output, a group left with one finished episode returns it with mask 0, every fact is spooled.
One line per check; exit status 1 if any differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(REPO), str(REPO / "plugins" / "advantages"), str(REPO / "plugins" / "verl"),
                str(REPO / "plugins" / "advantages" / "tests")]

import attrs  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories  # noqa: E402

from beyondagent_core.advantages import AdvantageBatch, estimate_finished  # noqa: E402
from beyondagent_plugin_advantages import grpo, reinforce, rloo  # noqa: E402
from beyondagent_plugin_verl.group_gate import Verdict, verdicts  # noqa: E402
from verl_estimator_parity import as_batch, random_mask, random_scores, token_rewards  # noqa: E402

TOLERANCE = 1e-6
N = 4  # sessions a prompt (rollout.n)
ESTIMATORS = {  # verl's name and options -> ours
    "grpo": ("grpo", True, grpo.Grpo(grpo.GrpoConfig(norm_by_std=True))),
    "dr_grpo": ("grpo", False, grpo.DrGrpo()),
    "rloo": ("rloo", True, rloo.Rloo()),
    "reinforce_plus_plus": ("reinforce_plus_plus", True, reinforce.ReinforcePlusPlus()),
    "reinforce_plus_plus_baseline": ("reinforce_plus_plus_baseline", True, reinforce.ReinforcePlusPlusBaseline()),
}
failures: list[str] = []
checks = 0
covered = {"dropped": 0, "skipped groups": 0, "gate needed": 0}


def with_failures(batch: AdvantageBatch, failed: list[bool]) -> AdvantageBatch:
    return attrs.evolve(batch, episodes=tuple(attrs.evolve(e, failure="error" if f else None)
                                              for e, f in zip(batch.episodes, failed)))


def verl_advantages(name: str, norm: bool, mask: torch.Tensor, rewards: torch.Tensor, uids: list[str],
                    sessions: list[int], rows: list[int]) -> np.ndarray:
    """verl V1's advantages of `rows` (the others: 0), keyed as its agent loop keys them."""
    keep = torch.tensor(rows, dtype=torch.long)
    data = DataProto(batch=TensorDict({"response_mask": mask[keep].clone(), "token_level_rewards": rewards[keep]},
                                      batch_size=len(rows)),
                     non_tensor_batch={"uid": np.array([uids[r] for r in rows], dtype=object)})
    keys = [f"{uids[r]}_{sessions[r]}_0" for r in rows]
    out = compute_advantage_for_multi_trajectories(data, batch_keys=keys, adv_estimator=name, num_repeat=N,
                                                   norm_adv_by_std_in_grpo=norm, config=AlgoConfig())
    full = np.zeros(tuple(mask.shape))
    full[rows] = (out.batch["advantages"] * out.batch["response_mask"]).double().numpy()
    return full


def check(tag: str, ours: np.ndarray, verls: np.ndarray) -> None:
    global checks
    checks += 1
    diff = float(np.max(np.abs(ours - verls))) if ours.size else 0.0
    ok = bool(np.all(np.abs(ours - verls) <= TOLERANCE + TOLERANCE * np.abs(verls)))
    print(f"{'ok  ' if ok else 'FAIL'} {tag}: max |ours - verl| = {diff:.1e}")
    if not ok:
        failures.append(tag)


def check_batch(tag: str, seed: int, prompts: int, length: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    size = prompts * N
    mask = random_mask(gen, size, length)
    mask[mask.sum(-1) == 0, 0] = 1.0  # a finished episode has a model token; failures are drawn below
    uids = [f"p{i // N}" for i in range(size)]
    sessions = [i % N for i in range(size)]
    scores = random_scores(gen, size, seed)
    failed = (torch.rand(size, generator=gen) < 0.3).tolist()
    batch = with_failures(as_batch(mask, uids, scores), failed)
    rewards = token_rewards(mask, scores)
    gate = {}
    for p in range(prompts):
        for i, verdict in zip(range(p * N, (p + 1) * N), verdicts(["error" if failed[i] else None
                                                                    for i in range(p * N, (p + 1) * N)])):
            gate[i] = verdict
    rows = [i for i in range(size) if gate[i] is not Verdict.DROP]
    gated_mask = mask.clone()
    for i in rows:
        if gate[i] is Verdict.SKIP:
            gated_mask[i] = 0.0
    covered["dropped"] += size - len(rows)
    covered["skipped groups"] += len({uids[i] for i in rows if gate[i] is Verdict.SKIP})
    if len(rows) == 0 or gated_mask.sum() < 2:
        return  # verl's batch whitening refuses fewer than 2 tokens (the estimator parity test covers it)
    for ours_name, (verl_name, norm, estimator) in ESTIMATORS.items():
        ours = estimate_finished(estimator, batch, who=ours_name)
        ours_tokens = np.stack([np.asarray(a, dtype=np.float64) for a in ours.per_token]) * mask.numpy()
        check(f"{tag} {ours_name}", ours_tokens,
              verl_advantages(verl_name, norm, gated_mask, rewards, uids, sessions, rows))
        if ours_name == "grpo" and any(failed):  # without the gate, verl's groups count the failures
            ungated = verl_advantages(verl_name, norm, mask, rewards, uids, sessions, list(range(size)))
            covered["gate needed"] += int(not np.allclose(ours_tokens, ungated, atol=1e-4))


def check_agent_loop() -> None:
    """`BeyondAgentLoop.run` through the gate: group A (2 of 4 fail), group B (3 of 4 fail: skipped),
    group C (one raises, one finishes, two fail: skipped, and no session waits forever)."""
    import asyncio
    from types import SimpleNamespace

    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

    from beyondagent_core.types import Reward, Task, Trajectory
    from beyondagent_plugin_verl import agent_loop
    from beyondagent_plugin_verl.group_gate import GATE

    global checks
    worker = SimpleNamespace(gates_failures=True, sessions={})
    agent_loop.runtime = lambda *args: worker
    spooled: list[dict] = []
    outcomes = {"A": [None, "boom", "boom", None], "B": ["boom", None, "boom", "boom"],
                "C": ["raise", None, "boom", "boom"]}

    async def episode(self, worker, place, sampling_params, row):
        await asyncio.sleep(0.01 * row["session_id"])  # sessions end in turn, as they do
        error = outcomes[row["uid"]][row["session_id"]]
        if error == "raise":
            raise RuntimeError("the episode raised")
        trajectory = Trajectory(task=Task(task_id=row["uid"]), reward=Reward(score=0.0 if error else 1.0,
                                                                             success=not error), error=error)
        output = AgentLoopOutput(prompt_ids=[1], response_ids=[5, 6], response_mask=[1, 1], metrics=AgentLoopMetrics(),
                                 extra_fields={"beyondagent": {"error": error}})
        return [(output, None, trajectory, False, f"{row['uid']}-{row['session_id']}")]  # one seat

    loop = agent_loop.BeyondAgentLoop.__new__(agent_loop.BeyondAgentLoop)
    loop.spec_path, loop.spec_overrides, loop.run_dir, loop.cwd = "spec.yaml", (), ".", None
    loop.groups = {"train": 3, "val": 3}
    loop.rollout_config = SimpleNamespace(n=N)
    loop.episode = episode.__get__(loop)
    loop.spool = lambda worker, row, place, sequence, trajectory, output, **kw: spooled.append(
        output.extra_fields["beyondagent"])

    async def group(uid: str, index: int) -> list:
        rows = [{"uid": uid, "session_id": s, "index": index, "global_steps": 1, "extra_info": {"split": "train"}}
                for s in range(N)]
        return await asyncio.gather(*(loop.run({}, **row) for row in rows), return_exceptions=True)

    async def all_groups() -> list:
        return await asyncio.wait_for(asyncio.gather(group("A", 0), group("B", 1), group("C", 2)), timeout=10)

    a, b, c = asyncio.run(all_groups())
    got = {"A": a, "B": b, "C": c}
    expected = {"A": ["train", [], [], "train"], "B": [[], "skip", [], []], "C": ["raised", "skip", [], []]}
    for uid, results in got.items():
        shape = ["raised" if isinstance(r, BaseException) else [] if r == [] else
                 "skip" if not any(r.response_mask) else "train" for r in results]
        checks += 1
        ok = shape == expected[uid]
        print(f"{'ok  ' if ok else 'FAIL'} agent loop group {uid}: {shape}")
        if not ok:
            failures.append(f"agent loop group {uid}")
    facts = sorted((f.get("dropped") or "", f.get("group_skipped") or "") for f in spooled)
    want = sorted([("", ""), ("error", ""), ("error", ""), ("", ""),
                   ("error", "B"), ("", "B"), ("error", "B"), ("error", "B"),
                   ("", "C"), ("error", "C"), ("error", "C")])  # C's raising session spools nothing
    checks += 1
    ok = facts == want and all(f.get("gated") for f in spooled) and GATE.pending() == 0
    print(f"{'ok  ' if ok else 'FAIL'} agent loop facts: {len(spooled)} spooled, gate holds {GATE.pending()} groups")
    if not ok:
        failures.append(f"agent loop facts {facts}")


def main() -> int:
    import verl

    print(f"verl {verl.__version__}; {N} sessions a prompt, ~30% failed")
    for seed in range(8):
        for prompts, length in ((2, 3), (4, 8), (8, 16)):
            check_batch(f"seed={seed} prompts={prompts} T={length}", seed * 100 + prompts * 10 + length, prompts,
                        length)
    check_agent_loop()
    print("covered: " + ", ".join(f"{name} {count}" for name, count in covered.items()))
    for name, count in covered.items():
        if not count:
            failures.append(f"no input had {name}")
            print(f"FAIL coverage: no input had {name}")
    print(f"{checks} checks, {len(failures)} mismatches (tolerance {TOLERANCE})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
