"""examples/bfcl.yaml end to end with the tiny model on a CPU, then `beyondagent eval` on it.

Everything is real: BFCL's tasks, its backends and checkers in the BFCL venv behind the launched
env service, the tiny policy trained by the torch backend. Then `beyondagent eval` on the run's
checkpoint reports accuracy per BFCL category, and BFCL's own evaluator, run on the same
recorded outputs, gives the same numbers. Last, `beyondagent explore` with the example's explorer
(`random_actions`, no LLM) and the hindsight summarizer on multi-turn seeds: every synthetic task
it writes is solved by its own reference, judged by BFCL's checker through the env.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "bfcl.yaml"
SMALL = ("model.path=tiny", "tasks.train.limit=2", "tasks.val.limit=1", "backend.max_new_tokens=8")


@pytest.mark.beyondagent_plugins("bfcl", "random_explorer", "mixers", "torch", "synthesis")
def test_the_example_explores_synthesizes_and_trains(run_spec: Any, bfcl_venv: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "bfcl")  # what the launched server (in the venv) loads
    started = time.monotonic()
    result = run_spec(EXAMPLE, f"run.output_dir={tmp_path / 'runs'}", *SMALL)
    seconds = time.monotonic() - started
    assert result.metrics["steps"] == 2 and result.metrics["train/episode_errors"] == 0.0
    samples = [json.loads(line)["trajectory"] for line in (result.run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["reward"]["reason"].startswith("BFCL: ") for s in samples)
    print(f"examples/bfcl.yaml, 2 steps: {seconds:.1f} s")

    from beyondagent_core.cli import main

    capsys.readouterr()
    # the eval's own process needs the explorer, mixer and backend the spec names too
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "bfcl,random_explorer,mixers,torch,synthesis")
    out = tmp_path / "eval"
    assert main(["eval", str(EXAMPLE), *SMALL, "tasks.val.limit=3", "--checkpoint", str(result.run_dir), "--k", "2",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "simple_python" in printed and "parallel" in printed
    groups = json.loads((out / "eval.json").read_text())["by_group"]
    assert set(groups) == {"simple_python", "multiple", "parallel"}

    venv = bfcl_venv
    scored = subprocess.run([str(venv.python), "-m", "beyondagent_plugin_bfcl.agreement", "--episodes",
                             str(out / "episodes.jsonl")], env=venv.environ(), capture_output=True, text=True,
                            check=True)
    theirs = json.loads(scored.stdout.strip().splitlines()[-1])
    for category, numbers in theirs.items():
        assert numbers["agree"] == numbers["episodes"], (category, numbers)
        assert groups[category]["pass@1"] == pytest.approx(numbers["bfcl_accuracy"])


@pytest.mark.beyondagent_plugins("bfcl", "random_explorer", "mixers", "torch", "synthesis")
def test_exploring_bfcls_backends_makes_tasks_bfcl_verifies(server: Any, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from beyondagent_plugin_bfcl.workflow import BFCLWorkflow

    from beyondagent_core.cli import main
    from beyondagent_plugin_envservice.client import EnvServiceClient
    from beyondagent_core.jsonl import read_tasks
    from beyondagent_core.types import Turn

    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "bfcl,random_explorer,mixers,torch,synthesis")
    assert main(["explore", str(EXAMPLE), f"run.output_dir={tmp_path}", "tasks.train.categories=[multi_turn_base]",
                 "tasks.train.limit=3", "explore.n=2"]) == 0
    synthetic = read_tasks(tmp_path / "bfcl" / "synthetic_tasks.jsonl")
    assert synthetic and all(task.metadata["goal"]["kind"] == "calls" for task in synthetic)
    assert all(task.seed_task_id.startswith("multi_turn_base_") for task in synthetic)

    class Replay:
        def __init__(self, actions: list[str]):
            self.actions = [*actions, "Done."]

        async def chat(self, messages: Any, **sampling: Any) -> Turn:
            return Turn(role="assistant", content=self.actions.pop(0) if self.actions else "Done.")

    async def solve(task: Any) -> Any:
        client = EnvServiceClient(server.url, token=server.token)
        try:
            async with client.env("bfcl") as env:
                return await BFCLWorkflow().run(task, env, Replay(list(task.ground_truth)))
        finally:
            await client.aclose()

    for task in synthetic:
        trajectory = asyncio.run(solve(task))
        assert trajectory.reward.success, (task.query, trajectory.reward.reason)
