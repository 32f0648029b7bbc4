"""Spec keys of the `appworld` env that reach their code: `keep_outputs`.

AppWorld writes each episode's logs and end databases to `experiments/outputs/<experiment>` under
its root. By default the env removes that directory when it closes the episode's world (at the
next `reset` and at `close`); `keep_outputs: true` leaves it. Checked here with the real
`AppWorldEnv` in the main environment, where `appworld` must never be installed: a stand-in
`appworld` module (put in `sys.modules` for this test only) opens "worlds" that write their output
directory where AppWorld does and expose it as `base_output_directory`, as AppWorld's `AppWorld`
does. The real AppWorld in the plugin's venv needs a generated world (~10 s) and an import per
process, too slow for this check; the served-env tests run real worlds.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_appworld.config import AppWorldConfig
from beyondagent_plugin_appworld.env import AppWorldEnv

from beyondagent_core import Task


def stand_in_appworld(root: Path) -> types.ModuleType:
    """The part of `appworld` the env's reset and close use (a stand-in: appworld is not installed here)."""
    module = types.ModuleType("appworld")

    class AppWorld:
        def __init__(self, task_id: str, experiment_name: str, timeout_seconds: int | None = None) -> None:
            self.base_output_directory = str(root / "experiments" / "outputs" / experiment_name)
            logs = Path(self.base_output_directory) / "tasks" / task_id / "logs"
            logs.mkdir(parents=True)
            (logs / "api_calls.jsonl").write_text("{}\n")
            self.task = types.SimpleNamespace(instruction=f"do {task_id}", supervisor={
                "first_name": "Ada", "last_name": "L", "email": "ada@example.com", "phone_number": "1"})
            self.closed = False

        def close(self) -> None:
            self.closed = True

    module.AppWorld = AppWorld
    module.update_root = lambda path: None
    return module


def outputs_after_two_episodes(root: Path, **config: Any) -> tuple[Path, Path, list[Path]]:
    """Two episodes then close; the two output directories, and which of them are left."""
    env = AppWorldEnv(AppWorldConfig(root=str(root), **config))
    env.reset(Task(task_id="task_a"))
    first = Path(env.world.base_output_directory)
    assert first.is_dir()
    env.reset(Task(task_id="task_b"))  # closes the first episode's world
    second = Path(env.world.base_output_directory)
    assert second.is_dir() and second != first
    env.close()
    left = sorted(path for path in (first, second) if path.exists())
    return first, second, left


@pytest.mark.parametrize("keep", [False, True])
def test_keep_outputs_keeps_each_episodes_output_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          keep: bool) -> None:
    root = tmp_path / "root"
    (root / "data" / "tasks").mkdir(parents=True)  # what `data_root` asks of an AppWorld root
    monkeypatch.setitem(sys.modules, "appworld", stand_in_appworld(root))
    monkeypatch.setenv("APPWORLD_ROOT", str(root))  # the env sets it; restored after the test
    settings = {"keep_outputs": True} if keep else {}
    first, second, left = outputs_after_two_episodes(root, **settings)
    if keep:
        assert left == sorted([first, second])
        assert (first / "tasks" / "task_a" / "logs" / "api_calls.jsonl").read_text() == "{}\n"
    else:  # the default: removed at the next reset, and at close
        assert left == []
        assert (root / "experiments" / "outputs").is_dir()  # only the episodes' own directories go
