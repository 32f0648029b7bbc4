"""`beyondagent run` on AppWorld end to end: the tiny locally built model, `backend: torch`, the env
launched from its venv (`env.service: launch`), judged by the `appworld` judge, samples written.

The tiny model has random weights: it will not solve AppWorld. The run must go end to end and
write samples whose rewards carry AppWorld's failed checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.beyondagent_plugins("appworld", "torch", "mixers")


def test_one_grpo_step_with_the_tiny_model(run_spec: Any, world_root: Path, appworld_venv: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "appworld")  # what the launched server (in the venv) loads
    spec = {
        "run": {"name": "appworld-tiny", "seed": 0},
        "model": {"path": "tiny"},
        "tasks": {"train": {"name": "appworld", "root": str(world_root), "split": "train", "limit": 1}},
        "env": {"name": "appworld", "service": "launch", "root": str(world_root), "max_turns": 2,
                "max_output_chars": 500},
        "reward": {"name": "appworld"},
        "workflow": {"name": "appworld_react", "max_turns": 2},
        "mixture": {"name": "original"},
        "algorithm": {"group_size": 2, "kl_coef": 0.0},
        "backend": {"name": "torch", "device": "cpu", "total_steps": 1, "batch_size": 1, "max_new_tokens": 8,
                    "max_episode_tokens": 2048, "micro_batch_size": 2},
    }
    result = run_spec(spec)
    assert result.metrics["steps"] == 1 and result.metrics["train/episode_errors"] == 0.0
    samples = [json.loads(line) for line in (result.run_dir / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2
    for sample in samples:
        trajectory = sample["trajectory"]
        reward = trajectory["reward"]
        assert trajectory["task"]["task_id"] == "gen0000a_1"
        assert reward["details"]["total"] >= 3 and 0.0 <= reward["score"] < 1.0
        assert "the answer given to complete_task is the right one" in [f["requirement"]
                                                                         for f in reward["details"]["failed"]]
        assert trajectory["turns"][0]["role"] == "system" and "show_api_descriptions" in trajectory["turns"][0]["content"]


@pytest.mark.beyondagent_plugins("appworld", "torch", "mixers", "random_explorer", "llm")
def test_the_example_spec_plans_on_a_generated_world(plugin_manager: Any, world_root: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from beyondagent_core import pipeline

    monkeypatch.setenv("APPWORLD_ROOT", str(world_root))
    monkeypatch.setenv("OPENAI_API_KEY", "unused: nothing is explored in a plan")
    example = Path(__file__).resolve().parents[3] / "examples" / "appworld.yaml"
    session = pipeline.prepare(example, [], manager=plugin_manager)
    plan = pipeline.plan(session)
    spec = session.spec
    assert spec.component("env").name == "appworld" and spec.component("workflow").name == "appworld_react"
    assert spec.algorithm.group_size == 8
    assert plan.original == 4 and plan.val == 1  # the generated world: train 4, dev 1
    assert plan.synthetic is None and "to be explored: 4 seeds x 2" in plan.synthetic_source
