"""FrozenLake as text, on real gymnasium: maps from seeds, scripted walks, invalid answers, limits."""

from __future__ import annotations

import pytest
from beyondagent_plugin_gym.config import FrozenLakeConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from gym_helpers import frozenlake_path, play, text

from beyondagent_core import Task

MAP_3X3 = ["SFF", "FHF", "FFG"]


def lake(**config) -> FrozenLake:
    return FrozenLake(FrozenLakeConfig(**config))


def map_of(env: FrozenLake, task: Task) -> list[str]:
    return env.reset(task).info["metadata"]["map"]


# --- what the model sees -------------------------------------------------------------------------


def test_reset_shows_the_rules_then_the_goal_and_the_grid() -> None:
    reset = lake().reset(Task(task_id="t", metadata={"seed": 17, "size": 3, "map": MAP_3X3}))
    system, user = reset.messages
    assert system["role"] == "system" and user["role"] == "user"
    for part in ("3x3 grid", "Rows are numbered 0-2", "H hole", "G goal", "P you",
                 "Valid actions: left, down, right, up", "'Action: <action>'"):
        assert part in system["content"]
    assert "slippery" not in system["content"]
    assert user["content"] == ("Reach the goal G without falling into a hole.\n"
                               "PFF\nFHF\nFFG\nYou are at row 0, column 0.")
    assert reset.info["metadata"] == {"seed": 17, "size": 3, "is_slippery": False, "map": MAP_3X3}
    assert reset.info["actions"] == ["left", "down", "right", "up"]


def test_turn_prompt_closes_every_observation_that_expects_a_move() -> None:
    ask = "Your move? Answer with one word."
    env = lake(turn_prompt=ask, max_steps=3)
    reset = env.reset(Task(task_id="t", metadata={"map": MAP_3X3}))
    assert reset.messages[1]["content"] == ("Reach the goal G without falling into a hole.\n"
                                            f"PFF\nFHF\nFFG\nYou are at row 0, column 0.\n{ask}")
    moved = env.step({"role": "assistant", "content": "right"})
    assert text(moved) == f"SPF\nFHF\nFFG\nYou are at row 0, column 1.\n{ask}"
    invalid = env.step({"role": "assistant", "content": "xyz"})
    assert text(invalid).endswith(f"Answer with one of: left, down, right, up.\n{ask}")
    last = env.step({"role": "assistant", "content": "down"})  # into the hole: no move is expected any more
    assert last.terminated and not text(last).endswith(ask)

    out_of_steps = lake(turn_prompt=ask, max_steps=1)
    out_of_steps.reset(Task(task_id="t", metadata={"map": MAP_3X3}))
    assert text(out_of_steps.step({"role": "assistant", "content": "left"})).endswith("after 1 steps.")


def test_the_task_query_replaces_the_default_goal() -> None:
    reset = lake().reset(Task(task_id="t", query="Walk to G in exactly four moves.", metadata={"map": MAP_3X3}))
    assert reset.messages[1]["content"].startswith("Walk to G in exactly four moves.\nPFF\n")


def test_slippery_ice_is_announced() -> None:
    reset = lake(is_slippery=True).reset(Task(task_id="t", metadata={"map": MAP_3X3}))
    assert "The ice is slippery" in reset.messages[0]["content"]
    assert reset.info["metadata"]["is_slippery"] is True


# --- seeds and maps --------------------------------------------------------------------------------


def test_distinct_seeds_give_distinct_maps_and_the_same_seed_the_same_map() -> None:
    def maps(size: int) -> list[tuple[str, ...]]:
        env = lake(size=size)
        return [tuple(map_of(env, Task(task_id=f"t{seed}", metadata={"seed": seed}))) for seed in range(20)]

    six = maps(6)
    assert len(set(six)) == 20
    assert all(len(rows) == 6 and all(len(row) == 6 for row in rows) for rows in six)
    # Small maps have few layouts, so some seeds share one (gymnasium's generator, not ours).
    assert len(set(maps(4))) >= 15
    assert tuple(lake(size=6).reset(Task(task_id="other-id", metadata={"seed": 5})).info["metadata"]["map"]) == six[5]


def test_p_sets_how_many_tiles_are_frozen() -> None:
    env = lake(size=8)
    safe = map_of(env, Task(task_id="t", metadata={"seed": 1, "p": 1.0}))
    assert "H" not in "".join(safe)
    holey = map_of(env, Task(task_id="t", metadata={"seed": 1, "p": 0.6}))
    assert "".join(holey).count("H") > 5


def test_without_metadata_the_seed_comes_from_the_task_id() -> None:
    env = lake()
    first = env.reset(Task(task_id="frozenlake-train-4"))
    assert first.info["metadata"]["seed"] == 4
    assert env.reset(Task(task_id="frozenlake-val-4")).info["metadata"]["seed"] == 1_000_004
    hashed = env.reset(Task(task_id="my-own-task")).info["metadata"]["seed"]
    assert hashed >= 3_000_000 and hashed == lake().reset(Task(task_id="my-own-task")).info["metadata"]["seed"]
    # A synthetic task without metadata replays its seed task's start.
    synthetic = Task(task_id="s1", query="Visit row 1, column 0, then reach G.", origin="synthetic",
                     seed_task_id="frozenlake-train-4")
    assert env.reset(synthetic).info["metadata"] == first.info["metadata"]


def test_a_map_in_the_metadata_wins_over_the_seed() -> None:
    reset = lake(size=5).reset(Task(task_id="t", metadata={"seed": 3, "map": ["SH", "FG"]}))
    assert reset.info["metadata"] == {"seed": 3, "size": 2, "is_slippery": False, "map": ["SH", "FG"]}
    assert reset.messages[1]["content"].endswith("PH\nFG\nYou are at row 0, column 0.")


@pytest.mark.parametrize(
    ("metadata", "key"),
    [
        ({"seed": -1}, "metadata.seed"),
        ({"seed": True}, "metadata.seed"),
        ({"seed": "17"}, "metadata.seed"),
        ({"size": 1}, "metadata.size"),
        ({"p": 0}, "metadata.p"),
        ({"p": "high"}, "metadata.p"),
        ({"is_slippery": "no"}, "metadata.is_slippery"),
        ({"map": "SFFG"}, "metadata.map"),
        ({"map": []}, "metadata.map"),
        ({"map": ["SF", "FFG"]}, "metadata.map"),
        ({"map": ["SX", "FG"]}, "metadata.map"),
        ({"map": ["SS", "FG"]}, "metadata.map"),
        ({"map": ["SF", "FF"]}, "metadata.map"),
        ({"map": MAP_3X3, "size": 4}, "metadata.size"),
        ({"size": 100_000}, "metadata.size"),  # an env service must not build what a request asks for
        ({"map": ["S" + "F" * 70] + ["F" * 71] * 69 + ["F" * 70 + "G"]}, "metadata.map"),
    ],
)
def test_bad_metadata_is_a_one_line_value_error(metadata, key: str) -> None:
    with pytest.raises(ValueError, match=f"task 'bad-1': {key} must be") as info:
        lake().reset(Task(task_id="bad-1", metadata=metadata))
    assert "\n" not in str(info.value)


def test_a_task_of_another_game_is_refused() -> None:
    with pytest.raises(ValueError, match="is a taxi task, but this env plays frozenlake"):
        lake().reset(Task(task_id="taxi-train-0", env="taxi"))


# --- playing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [2, 3, 4, 6])
def test_a_bfs_walk_reaches_the_goal(size: int) -> None:
    env = lake(size=size)
    for seed in range(4):
        rows = map_of(env, Task(task_id=f"t{seed}", metadata={"seed": seed}))
        path = frozenlake_path(rows)
        steps = play(env, path)
        assert len(steps) == len(path)
        assert [s.terminated for s in steps] == [False] * (len(path) - 1) + [True]
        assert [s.reward for s in steps] == [0.0] * (len(path) - 1) + [1.0]
        assert text(steps[-1]).endswith("You reached the goal!")
        reward = env.evaluate()
        assert (reward.score, reward.success) == (1.0, True)
        assert reward.reason == f"reached the goal in {len(path)} step{'s' if len(path) > 1 else ''}"
        assert reward.details["outcome"] == "success"


def test_each_valid_answer_is_one_gymnasium_step() -> None:
    env = lake()
    env.reset(Task(task_id="t", metadata={"map": MAP_3X3}))
    step = env.step({"role": "assistant", "content": "I will move right."})
    assert text(step) == "SPF\nFHF\nFFG\nYou are at row 0, column 1."
    assert step.info == {"action": "right", "valid": True, "steps": 1, "invalid_actions": 0, "state": 1}
    assert env.gym_env.lastaction == 2


def test_falling_into_a_hole_ends_the_episode_without_success() -> None:
    env = lake()
    env.reset(Task(task_id="t", metadata={"map": MAP_3X3}))
    steps = play(env, ["right", "down"])
    assert steps[-1].terminated and steps[-1].reward == 0.0
    assert text(steps[-1]) == "SFF\nFPF\nFFG\nYou are at row 1, column 1.\nYou fell into a hole. The game is over."
    reward = env.evaluate()
    assert (reward.score, reward.success) == (0.0, False)
    assert reward.reason == "fell into a hole at row 1, column 1 after 2 steps"
    with pytest.raises(RuntimeError, match="after the episode ended"):
        env.step({"role": "assistant", "content": "left"})


def test_an_invalid_answer_is_counted_and_does_not_step_gymnasium() -> None:
    env = lake(invalid_action_reward=-0.1)
    env.reset(Task(task_id="t", metadata={"map": MAP_3X3}))
    step = env.step({"role": "assistant", "content": "xyz"})
    assert text(step) == "Invalid action 'xyz' (no action found). Answer with one of: left, down, right, up."
    assert (step.reward, step.terminated) == (-0.1, False)
    assert step.info["valid"] is False and step.info["problem"] == "no action found"
    assert env.gym_env.lastaction is None  # gymnasium never saw a step

    ambiguous = env.step({"role": "assistant", "content": "left or right"})
    assert text(ambiguous).startswith("Invalid action 'left or right' (names more than one action: left, right).")
    not_text = env.step({"role": "assistant", "content": None, "tool_calls": []})
    assert text(not_text).startswith("Invalid action '' (no action found)")
    assert env.gym_env.lastaction is None

    play(env, frozenlake_path(MAP_3X3))
    reward = env.evaluate()
    assert reward.success
    assert reward.score == pytest.approx(1.0 - 0.3)
    assert reward.details["invalid_actions"] == 3 and reward.details["steps"] == 7
    assert reward.reason == "reached the goal in 7 steps; 3 invalid actions"


def test_a_long_invalid_answer_is_quoted_short() -> None:
    env = lake()
    env.reset(Task(task_id="t", metadata={"map": MAP_3X3}))
    step = env.step({"role": "assistant", "content": "Let me think\nabout this very carefully before I decide"})
    assert text(step).startswith("Invalid action 'Let me think about this very carefull...' (no action found)")


def test_max_steps_ends_the_episode_counting_invalid_answers() -> None:
    env = lake(max_steps=3)
    env.reset(Task(task_id="t", metadata={"map": MAP_3X3}))
    steps = [env.step({"role": "assistant", "content": answer}) for answer in ("left", "???", "up")]
    assert [s.terminated for s in steps] == [False, False, True]
    assert text(steps[-1]).endswith("You are at row 0, column 0.\nOut of steps: the episode ends after 3 steps.")
    reward = env.evaluate()
    assert (reward.success, reward.details["outcome"]) == (False, "out_of_steps")
    assert reward.reason == "did not reach the goal within max_steps=3; 1 invalid action"


def test_reset_starts_a_new_episode() -> None:
    env = lake()
    task = Task(task_id="t", metadata={"map": MAP_3X3})
    first = env.reset(task)
    play(env, ["right", "down"])
    assert env.reset(task) == first
    reward = env.evaluate()
    assert (reward.score, reward.details["steps"], reward.details["outcome"]) == (0.0, 0, "in_progress")


def test_slippery_moves_are_fixed_by_the_seed() -> None:
    def walk(seed: int) -> list[str]:
        env = lake(is_slippery=True, size=8, max_steps=12)
        env.reset(Task(task_id="t", metadata={"seed": seed, "map": ["SFFFFFFF"] + ["F" * 8] * 6 + ["FFFFFFFG"]}))
        return [text(step) for step in play(env, ["right", "down"] * 6)]

    assert walk(1) == walk(1)
    assert len({tuple(walk(seed)) for seed in range(5)}) > 1


def test_methods_before_reset_and_close_twice() -> None:
    env = lake()
    with pytest.raises(RuntimeError, match="before reset"):
        env.step({"role": "assistant", "content": "left"})
    with pytest.raises(RuntimeError, match="before reset"):
        env.evaluate()
    env.close()
    env.reset(Task(task_id="t"))
    env.close()
    env.close()
    assert env.gym_env is None


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"size": 1}, "size"),
        ({"p": 0.0}, "p"),
        ({"p": 1.5}, "p"),
        ({"max_steps": 0}, "max_steps"),
        ({"invalid_action_reward": float("nan")}, "invalid_action_reward"),
        ({"tasks_per_split": 0}, "tasks_per_split"),
        ({"size": 8, "max_size": 4}, "max_size"),
        ({"turn_prompt": "  "}, "turn_prompt"),
    ],
)
def test_bad_config_raises_value_error_naming_the_key(config, key: str) -> None:
    with pytest.raises(ValueError, match=f"^{key} must be"):
        lake(**config)


def test_step_latency_makes_each_step_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    import beyondagent_plugin_gym.base as base

    slept: list[float] = []
    monkeypatch.setattr(base.time, "sleep", slept.append)
    env = lake(step_latency_ms=50)
    env.reset(Task(task_id="frozenlake-train-0"))
    env.step({"role": "assistant", "content": "right"})
    env.step({"role": "assistant", "content": "no move here"})
    assert slept == [0.05, 0.05]
    with pytest.raises(ValueError, match="step_latency_ms must be >= 0, got -1"):
        lake(step_latency_ms=-1)


def test_a_quick_game_runs_on_the_event_loop_and_a_slowed_one_in_worker_threads() -> None:
    """`inline_calls` is True for the toy-text game, False once `step_latency_ms` makes its steps sleep: a
    sleeping step on the event loop would hold every other episode (and a wrapper must not inherit it)."""
    import asyncio
    import threading

    from beyondagent_core.envs.local import LocalAsyncEnv

    async def step_thread(env: FrozenLake) -> tuple[bool, bool]:
        seen: list[int] = []
        step = env.step
        env.step = lambda action: seen.append(threading.get_ident()) or step(action)  # type: ignore[method-assign]
        async with LocalAsyncEnv(env) as wrapped:
            await wrapped.reset(Task(task_id="frozenlake-train-0"))
            await wrapped.step({"role": "assistant", "content": "right"})
            return wrapped.inline, seen == [threading.get_ident()]

    assert asyncio.run(step_thread(lake())) == (True, True)
    assert asyncio.run(step_thread(lake(step_latency_ms=1))) == (False, False)
