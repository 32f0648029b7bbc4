"""Failed episodes out of verl's own group baselines in its V1 (asynchronous) trainers (group_gate.py).

The gate's rule is the core's (`advantages.finished_part`); verl's V1 advantages behind it equal our
`estimate_finished` for every estimator verl has, and our agent loop's `run` applies it to a group's
sessions at once (v1_failure_parity.py, in verl's venv); the launcher reports what it dropped.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from pathlib import Path
from typing import Any

import attrs

from beyondagent_core.advantages import AdvantageBatch, ScoredEpisode, finished_part
from beyondagent_core.metric_names import ADVANTAGE_DROPPED_EPISODES, ADVANTAGE_DROPPED_GROUPS, advantage_dropped
from beyondagent_core.types import Task
from beyondagent_plugin_verl.group_gate import GroupGate, Verdict, verdicts
from beyondagent_plugin_verl.metrics import episode_metrics

HERE = Path(__file__).resolve().parent


def test_the_gate_keeps_exactly_the_episodes_our_estimators_see() -> None:
    for size in (1, 2, 3, 4):
        for failed in itertools.product([False, True], repeat=size):
            episodes = tuple(ScoredEpisode(group="g", task=Task(task_id="g"), outcome=1.0, success=True, length=1,
                                           steps=(), failure="error" if f else None) for f in failed)
            kept, metrics = finished_part(AdvantageBatch(episodes=episodes))
            got = verdicts(["error" if f else None for f in failed])
            assert [i for i, v in enumerate(got) if v is Verdict.TRAIN] == kept, failed
            assert (Verdict.SKIP in got or (all(failed) and size > 0)) == bool(metrics["dropped_groups"]), failed


def test_a_groups_sessions_wait_for_each_other_and_a_raising_one_does_not_hang_them() -> None:
    gate = GroupGate()

    async def session(uid: str, index: int, failure: str | None, raises: bool = False) -> Any:
        await asyncio.sleep(0.005 * index)
        if raises:
            gate.report(uid, 3, index, "error", waits=False)
            return "raised"
        gate.report(uid, 3, index, failure)
        return await gate.verdict(uid, index)

    async def both() -> list[Any]:
        return await asyncio.wait_for(asyncio.gather(
            session("a", 0, None), session("a", 1, "timeout"), session("a", 2, None),
            session("b", 0, None, raises=True), session("b", 1, None), session("b", 2, "error")), timeout=5)

    got = asyncio.run(both())
    assert got[:3] == [(Verdict.TRAIN, False), (Verdict.DROP, False), (Verdict.TRAIN, False)]
    assert got[3:] == ["raised", (Verdict.SKIP, True), (Verdict.DROP, True)]
    assert gate.pending() == 0  # nothing left behind once every session read its verdict


def test_the_launcher_reports_what_the_gate_dropped() -> None:
    facts = [{"success": True, "gated": True}, {"success": False, "gated": True, "dropped": "timeout",
                                                 "error": "TimeoutError: x"},
             {"success": True, "gated": True, "group_skipped": "u2"},
             {"success": False, "gated": True, "dropped": "error", "group_skipped": "u2", "error": "E: y"},
             {"success": False, "gated": True, "dropped": "untrainable", "group_skipped": "u3"}]
    metrics = episode_metrics(facts)
    assert metrics[ADVANTAGE_DROPPED_EPISODES] == 3.0
    assert metrics[ADVANTAGE_DROPPED_GROUPS] == 2.0
    assert (metrics[advantage_dropped("timeout")], metrics[advantage_dropped("error")],
            metrics[advantage_dropped("untrainable")], metrics[advantage_dropped("split")]) == (1.0, 1.0, 1.0, 0.0)
    assert ADVANTAGE_DROPPED_EPISODES not in episode_metrics([attrs.asdict(Task(task_id="x")) | {"success": True}])


def test_verls_v1_advantages_behind_the_gate_equal_ours_and_the_agent_loop_applies_it(verl_venv: Any) -> None:
    result = subprocess.run([str(verl_venv.python), str(HERE / "v1_failure_parity.py")], capture_output=True,
                            text=True, timeout=600, env=verl_venv.environ(), check=False)
    lines = result.stdout.splitlines()
    mismatches = [line for line in lines if line.startswith("FAIL")]
    assert result.returncode == 0 and not mismatches, "\n".join(mismatches[:40]) + "\n" + result.stderr[-3000:]
    assert lines[-1].endswith("0 mismatches (tolerance 1e-06)"), lines[-3:]
    for name in ("grpo", "dr_grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline",
                 "agent loop group C", "agent loop facts"):
        assert any(f" {name}" in line for line in lines), f"no check of {name} ran"
