"""CliffWalking as text, on real gymnasium: the safe walk, the cliff, and what a seed can vary."""

from __future__ import annotations

from beyondagent_plugin_gym.cliffwalking import CliffWalking
from beyondagent_plugin_gym.config import CliffWalkingConfig
from gym_helpers import play, text

from beyondagent_core import Task

SAFE_WALK = ["up"] + ["right"] * 11 + ["down"]


def cliff(**config) -> CliffWalking:
    return CliffWalking(CliffWalkingConfig(**config))


def test_reset_shows_the_rules_and_the_grid() -> None:
    reset = cliff().reset(Task(task_id="t", metadata={"seed": 3}))
    system, user = (message["content"] for message in reset.messages)
    assert "4x12 grid" in system and "-100" in system and "Valid actions: up, right, down, left" in system
    assert user == ("Reach the goal G without stepping into the cliff.\n"
                    "............\n............\n............\nPCCCCCCCCCCG\nYou are at row 3, column 0.")
    assert reset.info["metadata"] == {"seed": 3, "is_slippery": False}


def test_the_safe_walk_reaches_the_goal() -> None:
    env = cliff()
    env.reset(Task(task_id="cliffwalking-train-0"))
    steps = play(env, SAFE_WALK)
    assert len(steps) == 13 and steps[-1].terminated and not any(s.terminated for s in steps[:-1])
    assert text(steps[0]).startswith("............\n............\nP...........\nSCCCCCCCCCCG")
    assert text(steps[-1]).endswith("You are at row 3, column 11.\nYou reached the goal!")
    reward = env.evaluate()
    assert (reward.success, reward.score) == (True, -13.0)
    assert reward.reason == "reached the goal in 13 steps"


def test_stepping_into_the_cliff_costs_100_and_sends_the_player_back() -> None:
    env = cliff()
    env.reset(Task(task_id="t"))
    [step] = play(env, ["right"])
    assert (step.reward, step.terminated) == (-100.0, False)
    assert text(step).endswith("You are at row 3, column 0.\nYou fell off the cliff (-100) and are back at the start.")
    play(env, SAFE_WALK)
    assert env.evaluate().score == -113.0


def test_without_slippery_every_seed_plays_the_same_game() -> None:
    walks = set()
    for seed in range(5):
        env = cliff()
        env.reset(Task(task_id="t", metadata={"seed": seed}))
        walks.add(tuple(text(step) for step in play(env, SAFE_WALK)))
    assert len(walks) == 1


def test_with_slippery_the_seed_fixes_the_slides() -> None:
    def walk(seed: int) -> tuple[str, ...]:
        env = cliff(is_slippery=True, max_steps=13)
        reset = env.reset(Task(task_id="t", metadata={"seed": seed, "is_slippery": True}))
        assert "The ground is slippery" in reset.messages[0]["content"]
        return tuple(text(step) for step in play(env, SAFE_WALK))

    assert walk(4) == walk(4)
    assert len({walk(seed) for seed in range(5)}) > 1


def test_the_task_metadata_decides_slipperiness() -> None:
    reset = cliff(is_slippery=False).reset(Task(task_id="t", metadata={"is_slippery": True}))
    assert reset.info["metadata"]["is_slippery"] is True
