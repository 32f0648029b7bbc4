"""The plugin in the main environment: what it registers, its configs, its task source's errors,
and the pieces of the env that need no world (code extraction, truncation). None of this
imports `appworld`, which the main environment must never do."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_appworld import SERVE_ARGS
from beyondagent_plugin_appworld.config import AppWorldConfig, AppWorldTasksConfig, MissingData
from beyondagent_plugin_appworld.env import extract_code, task_message, truncate
from beyondagent_plugin_appworld.tasks import AppWorldTasks
from beyondagent_plugin_appworld.venv import appworld_recipe

from beyondagent_core.jsonl import BadRecords
from beyondagent_core.registry import Registry
from beyondagent_core.spec import select_component

pytestmark = pytest.mark.beyondagent_plugins("appworld")


def test_the_main_environment_has_no_appworld() -> None:
    assert importlib.util.find_spec("appworld") is None
    code = ("import sys, beyondagent_plugin_appworld, beyondagent_plugin_appworld.env, "
            "beyondagent_plugin_appworld.tasks, beyondagent_plugin_appworld.workflow, "
            "beyondagent_plugin_appworld.commands; assert 'appworld' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_it_registers_every_component(plugin_manager: Any) -> None:
    registry = Registry(plugin_manager)
    for kind, name in [("env", "appworld"), ("task_source", "appworld"), ("workflow", "appworld_react"),
                       ("reward", "appworld"), ("venv", "appworld"), ("command", "appworld")]:
        registration = registry.resolve(kind, name, key_path=kind)
        assert registration.plugin.name == "appworld"
    env = registry.resolve("env", "appworld", key_path="env").spec
    assert env.venv == "appworld" and tuple(env.serve_args) == SERVE_ARGS
    assert SERVE_ARGS[:2] == ("--instances", "process")


def test_the_venv_recipe_pins_appworld_and_old_ray_and_installs_the_plugin() -> None:
    recipe = appworld_recipe()
    assert recipe.name == "appworld"
    assert ["appworld==0.1.3.post1", "ray<2.56"] in [list(step) for step in recipe.steps]
    # the plugin and every first-party plugin it requires (its pyproject's, and theirs): the launched
    # env server is beyondagent-plugin-envservice's
    assert set(recipe.local) == {"beyondagent", "beyondagent-plugin-envservice", "beyondagent-plugin-synthesis",
                                 "beyondagent-plugin-llm", "beyondagent-plugin-appworld"}
    assert ("appworld", "install") in recipe.after and "import appworld" in recipe.check


@pytest.mark.parametrize("bad", [{"reward": "dense"}, {"max_turns": 0}, {"max_output_chars": 10}])
def test_bad_env_configs_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        AppWorldConfig(**bad)


def test_a_bad_split_is_refused() -> None:
    with pytest.raises(ValueError, match="split must be one of train, dev, test_normal, test_challenge"):
        AppWorldTasksConfig(split="validation")


def test_missing_data_names_the_setup_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("APPWORLD_ROOT", raising=False)
    with pytest.raises(MissingData, match="beyondagent appworld setup"):
        AppWorldTasks(AppWorldTasksConfig())
    with pytest.raises(MissingData, match=r"no data/tasks there.*beyondagent appworld setup"):
        AppWorldTasks(AppWorldTasksConfig(root=str(tmp_path)))


def test_missing_data_is_a_spec_error_naming_the_block(plugin_manager: Any, tmp_path: Path) -> None:
    from beyondagent_core.errors import BeyondAgentError

    registry = Registry(plugin_manager)
    component = select_component(registry, "task_source", {"name": "appworld", "root": str(tmp_path)},
                                 key_path="tasks.source", where="spec.yaml")
    with pytest.raises(BeyondAgentError, match="beyondagent appworld setup"):
        component.create()


def test_the_task_source_reads_splits_limit_and_ids(tmp_path: Path) -> None:
    datasets, tasks = tmp_path / "data" / "datasets", tmp_path / "data" / "tasks"
    datasets.mkdir(parents=True)
    ids = [f"abc{i}_1" for i in range(5)]
    for task_id in ids:
        (tasks / task_id).mkdir(parents=True)
        (tasks / task_id / "specs.json").write_text(f'{{"instruction": "do {task_id}"}}')
    (datasets / "dev.txt").write_text("\n".join(ids[:2] + [f"{ids[2]}:tagged"]) + "\n\n")
    load = lambda **kw: list(AppWorldTasks(AppWorldTasksConfig(root=str(tmp_path), split="dev", **kw)).load(
        BadRecords("fail")))
    assert [t.task_id for t in load()] == ids[:3]
    assert [t.task_id for t in load(limit=2)] == ids[:2]
    assert [t.task_id for t in load(ids=[ids[1]])] == [ids[1]]
    task = load()[0]
    assert task.env == "appworld" and task.query is None and task.metadata["instruction"] == f"do {ids[0]}"
    with pytest.raises(ValueError, match="not in the dev split"):
        AppWorldTasks(AppWorldTasksConfig(root=str(tmp_path), split="dev", ids=["nope_1"]))


def test_the_first_code_block_is_the_action() -> None:
    text = "I will look.\n```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```"
    assert extract_code(text) == "print(1)"
    assert extract_code("```py\nx = 1\n```") == "x = 1"
    assert extract_code("```\nx = 2\n```") == "x = 2"
    assert extract_code("no code here, just `inline`") is None


def test_long_outputs_are_cut_with_a_visible_marker() -> None:
    assert truncate("short", 100) == "short"
    cut = truncate("x" * 250, 100)
    assert cut.startswith("x" * 100) and "[... output truncated: 150 more characters not shown" in cut


def test_the_task_message_shows_the_supervisor_and_the_instruction() -> None:
    message = task_message("Play my playlist.", {"first_name": "Ada", "last_name": "Lo", "email": "ada@x.com",
                                                 "phone_number": "555"})
    assert "Ada Lo" in message and "ada@x.com" in message and "555" in message
    assert message.endswith("Task: Play my playlist.")
