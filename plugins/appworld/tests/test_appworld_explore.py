"""Self-questioning on AppWorld without an LLM: `random_actions` exploration (the env's read-only
code actions) + the `hindsight` summarizer make synthetic tasks whose answers the world itself
gave; the env grades them (right answer 1.0, wrong answer partial). Real envs, real worlds."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from beyondagent_core import Task
from beyondagent_plugin_envservice.client import EnvServiceClient

pytestmark = pytest.mark.beyondagent_plugins("appworld", "random_explorer", "torch", "mixers")


def test_exploration_with_hindsight_yields_tasks_the_env_grades(
        plugin_manager: Any, world_root: Path, appworld_venv: Any, server: Any, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from beyondagent_core import pipeline

    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "appworld")  # what the launched server (in the venv) loads
    spec = {
        "run": {"name": "appworld-explore", "output_dir": str(tmp_path / "runs"), "seed": 0},
        "model": {"path": "tiny"},
        "tasks": {"train": {"name": "appworld", "root": str(world_root), "split": "train", "limit": 2}},
        "env": {"name": "appworld", "service": "launch", "root": str(world_root)},
        "explore": {"name": "random", "mode": "random_actions", "max_explore_step": 7, "n": 1, "workers": 2,
                    "summarizer": {"name": "hindsight", "max_tasks": 3, "judge": "appworld"},
                    "filters": [{"name": "dedup", "scope": "seed"}]},
        "workflow": {"name": "appworld_react"},
        "mixture": {"name": "original"},
        "backend": {"name": "torch", "device": "cpu"},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    session = pipeline.prepare(path, [], manager=plugin_manager)
    report = pipeline.explore_only(session)
    tasks = report.tasks
    assert len(tasks) >= 2, f"exploration made {len(tasks)} tasks"
    kinds = set()
    for task in tasks:
        assert task.origin == "synthetic" and task.seed_task_id in ("gen0000a_1", "gen0001a_1")
        assert task.judge == "appworld" and task.query and "?" in task.query
        goal = task.metadata["goal"]
        kinds.add(goal["kind"])
        assert "answer" in goal and task.ground_truth, task
    assert kinds <= {"spotify_playlist_count", "spotify_playlist_size", "venmo_balance"}
    assert_graded_on_its_answer(server, tasks[0])


def assert_graded_on_its_answer(server: Any, task: Task) -> None:
    """The env grades a synthetic task: its recorded answer 1.0, another answer partial."""
    answer = task.metadata["goal"]["answer"]

    async def answer_with(value: Any) -> Any:
        client = EnvServiceClient(server.url, token=server.token)
        try:
            async with client.env("appworld") as env:
                reset = await env.reset(task)
                assert reset.messages[0]["content"].endswith(f"Task: {task.query}")
                step = await env.step({"role": "assistant",
                                       "content": f"```python\napis.supervisor.complete_task(answer={value!r})\n```"})
                assert step.terminated
                return await env.evaluate()
        finally:
            await client.aclose()

    right, wrong = asyncio.run(answer_with(answer)), asyncio.run(answer_with("not it"))
    assert right.score == 1.0 and right.success, right.reason
    assert wrong.score == 0.5 and not wrong.success
    assert wrong.details["failed"][0]["requirement"] == "the answer given to complete_task is the right one"
