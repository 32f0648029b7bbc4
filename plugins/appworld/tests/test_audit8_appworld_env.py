"""The `appworld` env's own logic around AppWorld, the parts the served tests leave open (the eighth
mutation audit): the env's `max_turns` ends the episode at that step (the served tests stop at the
workflow's smaller limit first); a goal task (exploration's synthetic tasks) succeeds only when the answer
is right *and* the task was marked complete; a world whose `close()` raises still has its output
directory removed; and no goal's question gives its answer away.

AppWorld's downloaded data cannot exist here and `appworld` must never be installed in the main
environment, so, as test_appworld_keys_reach.py does, a stand-in `appworld` module (put in `sys.modules`
for one test only) opens "worlds" that run no code: each has what the env calls (`execute`,
`task_completed`, the supervisor's `show_active_task` through `requester`, `close`) with scripted
answers. The served-env tests run real worlds.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_appworld.config import AppWorldConfig
from beyondagent_plugin_appworld.env import AppWorldEnv
from beyondagent_plugin_appworld.explore import Explorer

from beyondagent_core import Task

pytestmark = pytest.mark.beyondagent_plugins("appworld")


class Script:
    """What the stand-in worlds answer (set by each test)."""

    def __init__(self) -> None:
        self.completes_on = "complete_task"  # code that marks the task complete
        self.active_task: dict[str, Any] = {}  # what show_active_task gives
        self.close_raises = False


def stand_in_appworld(root: Path, script: Script) -> types.ModuleType:
    module = types.ModuleType("appworld")

    class Requester:
        def request(self, app: str, api: str, track: bool = True) -> dict[str, Any]:
            assert (app, api, track) == ("supervisor", "show_active_task", False)
            return dict(script.active_task)

    class AppWorld:
        def __init__(self, task_id: str, experiment_name: str, timeout_seconds: int | None = None) -> None:
            self.base_output_directory = str(root / "experiments" / "outputs" / experiment_name)
            Path(self.base_output_directory).mkdir(parents=True)
            self.task = types.SimpleNamespace(instruction=f"do {task_id}", supervisor={
                "first_name": "Ada", "last_name": "L", "email": "ada@example.com", "phone_number": "1"})
            self.requester = Requester()
            self.completed = False

        def execute(self, code: str) -> str:
            self.completed = self.completed or script.completes_on in code
            return f"ran {len(code)} characters"

        def task_completed(self) -> bool:
            return self.completed

        def close(self) -> None:
            if script.close_raises:
                raise RuntimeError("the world's databases could not be saved")

    module.AppWorld = AppWorld
    module.update_root = lambda path: None
    return module


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Script:
    root = tmp_path / "root"
    (root / "data" / "tasks").mkdir(parents=True)  # what `data_root` asks of an AppWorld root
    made = Script()
    monkeypatch.setitem(sys.modules, "appworld", stand_in_appworld(root, made))
    monkeypatch.setenv("APPWORLD_ROOT", str(root))  # the env sets it; restored after the test
    return made


def env_at(**config: Any) -> AppWorldEnv:
    return AppWorldEnv(AppWorldConfig(root=os.environ["APPWORLD_ROOT"], **config))


def code(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": f"```python\n{text}\n```"}


@pytest.mark.parametrize("max_turns", [1, 2, 3])
def test_the_envs_max_turns_ends_the_episode_at_that_step(script: Script, max_turns: int) -> None:
    env = env_at(max_turns=max_turns)
    env.reset(Task(task_id="task_a"))
    steps = [env.step(code("print(1)")) for _ in range(max_turns)]
    assert [step.terminated for step in steps] == [False] * (max_turns - 1) + [True]
    assert steps[-1].info["ended_by"] == "max_turns" and steps[-1].info["turn"] == max_turns
    assert all("ended_by" not in step.info for step in steps[:-1])
    env.close()


def test_completing_the_task_ends_the_episode_before_max_turns(script: Script) -> None:
    env = env_at(max_turns=3)
    env.reset(Task(task_id="task_a"))
    assert not env.step(code("print(1)")).terminated
    done = env.step(code("apis.supervisor.complete_task()"))
    assert done.terminated and done.info["completed"] and "ended_by" not in done.info
    env.close()


GOAL = {"kind": "venmo_balance", "answer": 12.5}


def graded(script: Script, active_task: dict[str, Any], reward: str) -> Any:
    script.active_task = active_task
    env = env_at(reward=reward)
    env.reset(Task(task_id="syn-1", query="What is my current Venmo balance?", origin="synthetic",
                   seed_task_id="task_a", metadata={"goal": dict(GOAL)}))
    try:
        return env.evaluate()
    finally:
        env.close()


def test_a_goal_task_succeeds_only_when_the_right_answer_completes_it(script: Script) -> None:
    right = graded(script, {"answer": "12.5", "status": "success"}, "sparse")
    assert (right.score, right.success, right.details["passes"]) == (1.0, True, 2)
    # the right answer, but the task ended as failed (complete_task(status="fail")): not a success
    for reward, score in (("sparse", 0.0), ("partial", 0.5)):
        failed = graded(script, {"answer": "12.5", "status": "fail"}, reward)
        assert (failed.score, failed.success, failed.details["completed"]) == (score, False, False)
        assert [f["requirement"] for f in failed.details["failed"]] == [
            "the task is marked complete through apis.supervisor.complete_task"]
    wrong = graded(script, {"answer": "13", "status": "success"}, "partial")
    assert (wrong.score, wrong.success) == (0.5, False)
    assert [f["requirement"] for f in wrong.details["failed"]] == ["the answer given to complete_task is the right one"]


@pytest.mark.parametrize("keep", [False, True])
def test_a_world_whose_close_raises_still_has_its_outputs_removed(script: Script, keep: bool) -> None:
    env = env_at(keep_outputs=keep)
    env.reset(Task(task_id="task_a"))
    output = Path(env.world.base_output_directory)
    assert output.is_dir()
    script.close_raises = True
    with pytest.raises(RuntimeError, match="could not be saved"):
        env.close()
    assert env.world is None and output.is_dir() == keep
    env.close()  # nothing left to close


def test_no_goal_question_gives_its_answer_away() -> None:
    explorer = Explorer()
    explorer.record("\n".join([
        'noise',
        '@@fact {"kind": "spotify_playlists", "playlists": [[1, "Focus"], [2, "Road trip"], [5, "Sleep"]]}',
        '@@fact {"kind": "spotify_playlist", "playlist_id": 1, "title": "Focus", "songs": ["a", "b", "c", "d"]}',
        '@@fact {"kind": "venmo_balance", "balance": 4321.75}',
    ]))
    goals = {goal["goal"]["kind"]: goal for goal in explorer.goals()}
    assert {kind: goal["goal"]["answer"] for kind, goal in goals.items()} == {
        "spotify_playlist_count": 3, "spotify_playlist_size": 4, "venmo_balance": 4321.75}
    assert goals["venmo_balance"]["query"] == "What is my current Venmo balance? Answer with the number only."
    assert goals["spotify_playlist_size"]["query"] == 'How many songs are in my Spotify playlist "Focus"?'
    for goal in goals.values():
        assert str(goal["goal"]["answer"]) not in goal["query"]
