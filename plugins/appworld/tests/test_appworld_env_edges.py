"""The `appworld` env's own logic at its edges, class by class (after the eighth mutation audit): every
env key with a value other than the default (`reward`, `max_output_chars`, `code_timeout`, `max_turns`
via the reset's info), each limit exactly on it and one past, the evaluation's branches (no episode, a
synthetic task with no ground truth, AppWorld's checks partial or sparse, no checks at all), which world a
task opens, the goal checks and answer comparison in each accepted form and the nearest rejected one,
and the explorer's actions as the facts come in (never one for a fact already found).

AppWorld's downloaded data cannot exist here and `appworld` must never be installed in the main
environment: the stand-in `appworld` module of test_audit8_appworld_env.py (its `script` fixture) opens
the "worlds"; this file subclasses its world to record what the env passes it, to answer with a chosen
output and to stand in for AppWorld's `evaluate` (a tracker of passed and failed checks).
"""

from __future__ import annotations

import sys
import threading
import types
from typing import Any

import pytest
from beyondagent_plugin_appworld.config import CODE_TIMEOUT_LIMIT, AppWorldConfig, AppWorldTasksConfig
from beyondagent_plugin_appworld.env import NO_CODE, extract_code
from beyondagent_plugin_appworld.explore import FACT, Explorer, check_goal, read_facts, same_answer
from beyondagent_plugin_appworld.workflow import AppWorldReact
from test_audit8_appworld_env import Script, code, env_at, script  # noqa: F401 - `script` is a fixture

from beyondagent_core import Task
from beyondagent_core.checks import MAX_TURNS
from beyondagent_core.protocols import EnvReset, EnvStep

pytestmark = pytest.mark.beyondagent_plugins("appworld")


class Seen:
    """What the stand-in worlds were opened with, what they print, what AppWorld's evaluation finds."""

    def __init__(self) -> None:
        self.opened: list[dict[str, Any]] = []
        self.output = "done"
        self.tracker = types.SimpleNamespace(pass_count=0, num_tests=0, failures=[], success=False)


@pytest.fixture
def seen(script: Script, monkeypatch: pytest.MonkeyPatch) -> Seen:  # noqa: F811 - the imported fixture
    recorded = Seen()
    base = sys.modules["appworld"].AppWorld

    class World(base):  # type: ignore[misc, valid-type]
        def __init__(self, task_id: str, experiment_name: str, timeout_seconds: int | None = None) -> None:
            recorded.opened.append({"task_id": task_id, "timeout_seconds": timeout_seconds})
            super().__init__(task_id, experiment_name, timeout_seconds)

        def execute(self, code: str) -> str:
            super().execute(code)
            return recorded.output

        def evaluate(self, suppress_errors: bool = False) -> Any:
            assert suppress_errors
            return recorded.tracker

    monkeypatch.setattr(sys.modules["appworld"], "AppWorld", World)
    return recorded


# --- keys and limits ------------------------------------------------------------------------------


@pytest.mark.parametrize(("length", "cut"), [(100, False), (101, True)])
def test_an_output_is_cut_only_past_max_output_chars(seen: Seen, length: int, cut: bool) -> None:
    seen.output = "x" * length
    env = env_at(max_output_chars=100)
    env.reset(Task(task_id="task_a"))
    step = env.step(code("print('x' * n)"))
    shown = step.observation[0]["content"]
    assert shown.startswith("x" * 100) and ("output truncated" in shown) == cut
    assert shown == "x" * 100 if not cut else "output truncated: 1 more characters not shown" in shown
    assert step.info["output_chars"] == length  # what the code printed, not what was shown
    env.close()


def test_the_code_timeout_reaches_the_world_on_the_main_thread_only(seen: Seen) -> None:
    env = env_at(code_timeout=7)
    env.reset(Task(task_id="task_a"))
    opened = threading.Thread(target=env.reset, args=(Task(task_id="task_b"),))  # AppWorld's SIGALRM: main only
    opened.start()
    opened.join()
    assert seen.opened == [{"task_id": "task_a", "timeout_seconds": 7}, {"task_id": "task_b", "timeout_seconds": None}]
    env.close()


def test_reset_names_the_envs_max_turns_and_a_tasks_query_replaces_the_instruction(seen: Seen) -> None:
    env = env_at(max_turns=4)
    plain = env.reset(Task(task_id="task_a"))
    assert plain.info["max_turns"] == 4 and plain.info["instruction"] == "do task_a"
    assert plain.messages[0]["content"].endswith("Task: do task_a")
    asked = env.reset(Task(task_id="task_a", query="Count my playlists."))
    assert asked.info["instruction"] == "Count my playlists." and "do task_a" not in asked.messages[0]["content"]
    env.close()


@pytest.mark.parametrize(("task", "world"), [
    (Task(task_id="syn-1", origin="synthetic", seed_task_id="task_a", query="q"), "task_a"),
    (Task(task_id="syn-2", origin="synthetic", query="q"), "syn-2"),  # no seed recorded: its own id
    (Task(task_id="task_b", seed_task_id="task_a"), "task_b"),  # an original task plays its own world
])
def test_a_synthetic_task_replays_its_seed_tasks_world(seen: Seen, task: Task, world: str) -> None:
    env = env_at()
    assert env.reset(task).info["world"] == world and seen.opened[-1]["task_id"] == world
    env.close()


@pytest.mark.parametrize(("key", "value", "accepted"), [
    ("max_turns", 1, True), ("max_turns", 0, False),
    ("max_turns", MAX_TURNS, True), ("max_turns", MAX_TURNS + 1, False),
    ("max_output_chars", 100, True), ("max_output_chars", 99, False),
    ("code_timeout", 1, True), ("code_timeout", 0, False),
    ("code_timeout", CODE_TIMEOUT_LIMIT, True), ("code_timeout", CODE_TIMEOUT_LIMIT + 1, False),
    ("reward", "sparse", True), ("reward", "Sparse", False),
])
def test_env_keys_are_accepted_up_to_their_limits(key: str, value: Any, accepted: bool) -> None:
    if accepted:
        assert getattr(AppWorldConfig(**{key: value}), key) == value
    else:
        with pytest.raises(ValueError, match=key if key != "reward" else "reward must be one of partial, sparse"):
            AppWorldConfig(**{key: value})


def test_the_documented_defaults() -> None:
    config = AppWorldConfig()
    assert (config.reward, config.max_turns, config.max_output_chars, config.keep_outputs, config.code_timeout) == (
        "partial", 30, 5000, False, 60)
    assert CODE_TIMEOUT_LIMIT == 110  # under the launched service's 120 s call timeout
    tasks = AppWorldTasksConfig()
    assert (tasks.split, tasks.limit, tasks.ids) == ("train", 0, [])
    with pytest.raises(ValueError, match="limit"):
        AppWorldTasksConfig(limit=-1)


# --- steps ----------------------------------------------------------------------------------------


def test_a_message_without_code_runs_nothing_and_completion_stays_once_reached(seen: Seen) -> None:
    env = env_at(max_turns=5)
    env.reset(Task(task_id="task_a"))
    idle = env.step({"role": "assistant", "content": "Let me think first."})
    assert idle.observation[0]["content"] == NO_CODE and not idle.info["ran_code"] and not idle.terminated
    assert idle.info["turn"] == 1  # a message without code still counts against max_turns
    seen.output = FACT + '{"kind": "venmo_balance", "balance": 3}'
    done = env.step(code("apis.supervisor.complete_task()"))
    assert done.terminated and done.info == {"ran_code": True, "completed": True, "turn": 2,
                                             "output_chars": len(seen.output)}
    assert env.describe_achieved()[0]["goal"] == {"kind": "venmo_balance", "answer": 3}  # what the code found
    env.close()
    assert env.valid_actions() == [] and env.describe_achieved() == []  # no world: nothing to offer


def test_step_before_reset_is_an_error_and_evaluate_says_there_is_no_episode(seen: Seen) -> None:
    env = env_at()
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\)"):
        env.step(code("print(1)"))
    reward = env.evaluate()
    assert (reward.score, reward.success) == (0.0, False) and "reset() was not called" in reward.reason


# --- evaluation -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("reward", "passes", "total", "success", "score"), [
    ("partial", 3, 4, False, 0.75), ("sparse", 3, 4, False, 0.0),
    ("partial", 4, 4, True, 1.0), ("sparse", 4, 4, True, 1.0),
    ("partial", 0, 0, False, 0.0),  # a task with no checks scores nothing, not a division by zero
])
def test_appworlds_checks_score_partial_or_sparse(seen: Seen, reward: str, passes: int, total: int, success: bool,
                                                 score: float) -> None:
    failures = [{"requirement": f"check {i}", "trace": f"trace {i}"} for i in range(total - passes)]
    seen.tracker = types.SimpleNamespace(pass_count=passes, num_tests=total, failures=failures, success=success)
    env = env_at(reward=reward)
    env.reset(Task(task_id="task_a"))
    result = env.evaluate()
    env.close()
    assert (result.score, result.success) == (score, success)
    assert result.details["passes"] == passes and result.details["total"] == total
    assert result.details["reward"] == reward and result.reason.startswith(f"{passes}/{total} checks passed")
    assert ("failed: check 0" in result.reason) == bool(failures)
    assert result.details["failed_text"] == "\n\n".join(f"check {i}\ntrace {i}" for i in range(len(failures)))


def test_a_synthetic_query_has_no_ground_truth_but_the_tasks_own_instruction_does(seen: Seen) -> None:
    seen.tracker = types.SimpleNamespace(pass_count=1, num_tests=1, failures=[], success=True)
    env = env_at()
    env.reset(Task(task_id="syn-1", origin="synthetic", seed_task_id="task_a", query="Count my playlists."))
    judged = env.evaluate()
    assert (judged.score, judged.success, judged.details) == (0.0, False, {"ground_truth": False, "completed": False})
    assert "llm_judge" in judged.reason
    env.reset(Task(task_id="task_a", query="do task_a"))  # its query is the world's instruction: AppWorld grades it
    assert env.evaluate().success
    env.close()


@pytest.mark.parametrize(("given", "expected", "same"), [
    ("12.5", 12.5, True), (12.0, "12", True), (" Yes. ", "yes", True), ("Focus", "focus", True),
    ("12.50", 12.5, False), ("13", 12.5, False), (None, "None", False), ("", "0", False),
])
def test_answers_compare_as_normalized_text(given: Any, expected: Any, same: bool) -> None:
    assert same_answer(given, expected) == same


@pytest.mark.parametrize("goal", [
    None, [], {"kind": "venmo_balance"}, {"kind": "spotify_playlist_title", "answer": "x"}, {"answer": 3},
])
def test_a_goal_without_a_known_kind_and_an_answer_is_refused_before_a_world_opens(seen: Seen, goal: Any) -> None:
    env = env_at()
    with pytest.raises(ValueError, match="an AppWorld goal is"):
        env.reset(Task(task_id="syn", metadata={"goal": goal}))
    assert seen.opened == []
    for kind in ("spotify_playlist_count", "spotify_playlist_size", "venmo_balance"):
        assert check_goal({"kind": kind, "answer": 0}) == {"kind": kind, "answer": 0}


# --- exploration ------------------------------------------------------------------------------------


def fact(**fields: Any) -> str:
    import json

    return FACT + json.dumps(fields)


def test_facts_are_read_only_from_whole_fact_lines() -> None:
    output = "\n".join([fact(kind="login", app="venmo"), " " + fact(kind="login", app="spotify"),
                        FACT + "{not json", FACT + '["kind"]', FACT + '{"app": "x"}', "@@fact" + '{"kind": "x"}'])
    assert read_facts(output) == [{"kind": "login", "app": "venmo"}]


def test_the_explorers_actions_follow_what_it_has_found_and_never_repeat_a_fact() -> None:
    explorer = Explorer()
    (first,) = explorer.actions()
    assert "show_account_passwords" in first and first.startswith("```python\n") and extract_code(first)
    explorer.record(fact(kind="passwords", accounts=["gmail", "venmo"]))
    (login,) = explorer.actions()  # no spotify account: no spotify login
    assert 'apis.venmo.login' in login and "spotify" not in login
    explorer.record(fact(kind="login", app="venmo"))
    (balance,) = explorer.actions()
    assert "show_venmo_balance" in balance
    explorer.record(fact(kind="venmo_balance", balance=7))
    assert explorer.actions() == []

    spotify = Explorer()
    spotify.record("\n".join([fact(kind="passwords", accounts=["spotify"]), fact(kind="login", app="spotify")]))
    (library,) = spotify.actions()
    assert "show_playlist_library" in library
    spotify.record(fact(kind="spotify_playlists", playlists=[[4, "Focus"], [9, "Sleep"]]))
    assert ["playlist_id=4" in action for action in spotify.actions()] == [True, False]
    spotify.record(fact(kind="spotify_playlist", playlist_id=4, title="Focus", songs=["a"]))
    (left,) = spotify.actions()
    assert "playlist_id=9" in left
    assert sorted(goal["goal"]["kind"] for goal in spotify.goals()) == ["spotify_playlist_count",
                                                                        "spotify_playlist_size"]


def test_the_react_workflow_opens_with_its_system_prompt_and_counts_the_turns_that_ran_code() -> None:
    workflow = AppWorldReact(system_prompt="Write code.")
    opening = workflow.opening(EnvReset(messages=[{"role": "user", "content": "Task: x"}], info={}))
    assert opening == [{"role": "system", "content": "Write code."}, {"role": "user", "content": "Task: x"}]
    steps = [EnvStep(observation=[], info={"ran_code": ran}) for ran in (True, False, True)] + [
        EnvStep(observation=[], info={})]
    assert workflow.step_metrics(steps) == {"code_turns": 2}
