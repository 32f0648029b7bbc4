"""Config classes of the gym envs and the `gym_tasks` source, and the checks of their values.

Kept free of gymnasium so the registry can read them without importing it. The spec loader
checks key names and types; the factories call the `check_*` functions, whose ValueError
the core turns into a spec error naming the block.

`invalid_action_reward` (every env) is the step reward of an answer that names no single
action. Unset (null), it is what a plain move costs in the game (`TextGymEnv.step_cost`): 0 in
FrozenLake and in goal tasks, -1 in Taxi and CliffWalking. An answer that does not act then
never scores above a move, so a policy cannot earn more by writing garbage than by playing
(with 0, thirty turns of garbage scored 0 in CliffWalking, above the best walk's -13). A
number sets the penalty itself (the quickstart's -0.1 is a format penalty on FrozenLake).

`turn_prompt` (every env) is a line closing every observation that expects a move, e.g. "Your
move? Answer as 'Action: <action>'." Unset, an observation ends with the board: a pretrained
instruct model then tends to continue the board instead of answering (SmolLM2-135M named no
move in 24 of 26 FrozenLake episodes), so the real-model profiles set one.

`step_latency_ms` (every env) makes each step wait that long first, like an env behind a slow
service or tool: for benchmarks of what overlaps env calls (`benchmarks/async_rollout.py`).
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from beyondagent_core.checks import MAX_REWARD, MAX_TURNS, REWARD_WHY, TURNS_WHY, number
from beyondagent_plugin_gym.seeds import SPLIT_SIZE, SPLITS

GAMES: tuple[str, ...] = ("frozenlake", "taxi", "cliffwalking")
MAP_SIDE_LIMIT = 128
"""The largest FrozenLake side any config may allow: gymnasium's transition table grows with the
map's area (a 128x128 env builds in about half a second, a 512x512 one in several seconds), and
every observation shows the whole map."""

# Each number's range (the factories' `check_*` functions below check what spans several keys).
_SIDE = number(ge=2, le=MAP_SIDE_LIMIT, why="time: gymnasium builds a table as large as the map, and every "
                                            "observation shows the whole map")
_P = number(gt=0, le=1, why="meaning: a probability (0 would make every tile a hole)")
_MAX_STEPS = number(ge=1, le=MAX_TURNS, why=TURNS_WHY)
_REWARD = number(ge=-MAX_REWARD, le=MAX_REWARD, why=REWARD_WHY)
_PER_SPLIT = number(ge=1, le=SPLIT_SIZE, why=f"meaning: a split has {SPLIT_SIZE:,} seeds")
_LATENCY = number(ge=0, le=60_000, why="time: a minute of waiting per step")


@attrs.define
class FrozenLakeConfig:
    """`frozenlake`: the map of a task without `metadata.map` is `generate_random_map(size, p, seed)`.

    `p` is the probability that a tile is frozen (the rest are holes). With `is_slippery` the
    player moves in the chosen direction only a third of the time (gymnasium's dynamics).
    A task's own `metadata` (map, size, p, is_slippery) wins over these defaults, up to `max_size`
    tiles a side (at most `MAP_SIDE_LIMIT`): a task cannot make the env build a map of any size
    it likes (a request of an env service is untrusted input). `invalid_action_reward`: see the
    module docstring.
    """

    size: int = attrs.field(default=4, validator=_SIDE)
    max_size: int = attrs.field(default=64, validator=_SIDE)
    p: float = attrs.field(default=0.8, validator=_P)
    is_slippery: bool = False
    max_steps: int = attrs.field(default=20, validator=_MAX_STEPS)
    invalid_action_reward: float | None = attrs.field(default=None, validator=_REWARD)
    turn_prompt: str | None = None
    tasks_per_split: int = attrs.field(default=100, validator=_PER_SPLIT)
    step_latency_ms: float = attrs.field(default=0.0, validator=_LATENCY)


@attrs.define
class TaxiConfig:
    """`taxi`: a task's seed (or its recorded `metadata.state`) fixes the taxi, passenger and destination.

    `invalid_action_reward`: see the module docstring (unset: -1, what a move costs).
    """

    max_steps: int = attrs.field(default=40, validator=_MAX_STEPS)
    invalid_action_reward: float | None = attrs.field(default=None, validator=_REWARD)
    turn_prompt: str | None = None
    tasks_per_split: int = attrs.field(default=100, validator=_PER_SPLIT)
    step_latency_ms: float = attrs.field(default=0.0, validator=_LATENCY)


@attrs.define
class CliffWalkingConfig:
    """`cliffwalking`: one fixed 4x12 map; a seed matters only when `is_slippery` is true.

    `invalid_action_reward`: see the module docstring (unset: -1, what a move costs).
    """

    is_slippery: bool = False
    max_steps: int = attrs.field(default=30, validator=_MAX_STEPS)
    invalid_action_reward: float | None = attrs.field(default=None, validator=_REWARD)
    turn_prompt: str | None = None
    tasks_per_split: int = attrs.field(default=100, validator=_PER_SPLIT)
    step_latency_ms: float = attrs.field(default=0.0, validator=_LATENCY)


@attrs.define
class GymTasksConfig:
    """`gym_tasks`: `count` tasks of `env` from the seed range of `split`, from index `start` on.

    `size` and `p` shape FrozenLake maps (`size` at most `MAP_SIDE_LIMIT`); `is_slippery` applies
    to frozenlake and cliffwalking; taxi uses neither.
    """

    env: str = "frozenlake"
    split: str = "train"
    count: int = attrs.field(default=100, validator=_PER_SPLIT)
    start: int = attrs.field(default=0, validator=number(ge=0, le=SPLIT_SIZE - 1, why=f"meaning: a split has "
                                                                                     f"{SPLIT_SIZE:,} seeds"))
    size: int = attrs.field(default=4, validator=_SIDE)
    p: float = attrs.field(default=0.8, validator=_P)
    is_slippery: bool = False


# --- checks ----------------------------------------------------------------------------------


def check_episode_config(config: Any) -> None:
    """The keys every env has: max_steps, invalid_action_reward, turn_prompt, tasks_per_split, step_latency_ms."""
    if config.max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {config.max_steps!r}")
    if config.invalid_action_reward is not None and not math.isfinite(config.invalid_action_reward):
        raise ValueError(f"invalid_action_reward must be a finite number, got {config.invalid_action_reward!r}")
    if not (math.isfinite(config.step_latency_ms) and config.step_latency_ms >= 0):
        raise ValueError(f"step_latency_ms must be a number >= 0, got {config.step_latency_ms!r}")
    if not 1 <= config.tasks_per_split <= SPLIT_SIZE:
        raise ValueError(f"tasks_per_split must be between 1 and {SPLIT_SIZE}, got {config.tasks_per_split!r}")
    if config.turn_prompt is not None and not config.turn_prompt.strip():
        raise ValueError("turn_prompt must be a non-empty line (or null for none), got an empty string")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_map_params(size: Any, p: Any, prefix: str = "") -> None:
    """FrozenLake's map generator needs 2 <= size (start and goal apart) <= MAP_SIDE_LIMIT and 0 < p <= 1."""
    if not (_is_int(size) and 2 <= size <= MAP_SIDE_LIMIT):
        raise ValueError(f"{prefix}size must be an integer in [2, {MAP_SIDE_LIMIT}], got {size!r}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 < p <= 1:
        # p = 0 would make every tile a hole: the generator would never find a valid map.
        raise ValueError(f"{prefix}p must be a number in (0, 1], got {p!r}")


def check_frozenlake_config(config: FrozenLakeConfig) -> None:
    check_episode_config(config)
    check_map_params(config.size, config.p)
    if not (_is_int(config.max_size) and config.size <= config.max_size <= MAP_SIDE_LIMIT):
        raise ValueError(f"max_size must be an integer in [size ({config.size}), {MAP_SIDE_LIMIT}], "
                         f"got {config.max_size!r}")


def check_tasks_config(config: GymTasksConfig) -> None:
    if config.env not in GAMES:
        raise ValueError(f"env must be one of {', '.join(GAMES)}, got {config.env!r}")
    if config.split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {config.split!r}")
    if config.count < 1:
        raise ValueError(f"count must be at least 1, got {config.count!r}")
    if config.start < 0:
        raise ValueError(f"start must be 0 or more, got {config.start!r}")
    if config.start + config.count > SPLIT_SIZE:
        raise ValueError(f"start + count must be at most {SPLIT_SIZE} (the seeds of one split), "
                         f"got {config.start} + {config.count}")
    check_map_params(config.size, config.p)
