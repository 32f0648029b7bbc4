"""FrozenLake as text: walk from S to the goal G over frozen tiles without falling into a hole.

A task's map is `metadata.map` when given, else gymnasium's `generate_random_map(size, p,
seed)`, so distinct seeds give distinct maps (tiny maps repeat: a 2x2 map has three possible
layouts). With `is_slippery` the seed also fixes where the ice slides. Success: reaching G
(gymnasium's reward 1). Sizes are bounded (`max_size`), and so is the map search: gymnasium
draws maps until one has a path from S to G, forever when `p` is too low for the size, so
`random_map` makes the same draws but gives up after `MAX_MAP_TRIES` (a ValueError).

The observation is the grid, one row of letters per line with the player as P, and where the
player is, e.g. for a 3x3 map at the start::

    PFF
    FHF
    FFG
    You are at row 0, column 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from gymnasium.envs.toy_text import FrozenLakeEnv
from gymnasium.envs.toy_text.frozen_lake import is_valid
from gymnasium.utils import seeding

from beyondagent_core import Task
from beyondagent_plugin_gym.base import Start, TextGymEnv, mark, moves_on_grid
from beyondagent_plugin_gym.config import FrozenLakeConfig, check_frozenlake_config
from beyondagent_plugin_gym.goals import Goal, bad_goal, check_cell, check_goal_shape, reach
from beyondagent_plugin_gym.metadata import TaskMetadata

TILES = "SFHG"
MAX_MAP_TRIES = 1000
"""Random maps drawn before giving up (at p >= 0.65 a map with a path takes a few tries, at any size)."""


class FrozenLake(TextGymEnv):
    name = "frozenlake"
    actions = ("left", "down", "right", "up")
    synonyms: ClassVar[Mapping[str, str]] = {"west": "left", "south": "down", "east": "right", "north": "up"}

    def __init__(self, config: FrozenLakeConfig):
        check_frozenlake_config(config)
        super().__init__(config)
        self.map: list[str] = []
        self.is_slippery = config.is_slippery

    def start(self, task: Task) -> Start:
        meta = TaskMetadata(task, self.name)
        seed = meta.seed()
        is_slippery = meta.flag("is_slippery", self.config.is_slippery)
        rows = meta.rows("map")
        recorded: dict[str, Any] = {"seed": seed}
        if rows is None:
            size = meta.integer("size", self.config.size, minimum=2, maximum=self.config.max_size)
            p = meta.number("p", self.config.p)
            if not 0 < p <= 1:
                raise meta.error("p", "a number in (0, 1]", p)
            rows = random_map(size, p, seed)
            if rows is None:
                where = "metadata.p" if "p" in meta else "the env's p"
                raise ValueError(f"task {task.task_id!r}: no {size}x{size} map with a path from S to G in "
                                 f"{MAX_MAP_TRIES} random maps at p={p:g} ({where}): use a larger p or a smaller size")
            recorded.update(size=size, p=p)
        else:
            if max(len(rows), len(rows[0])) > self.config.max_size:
                raise meta.error("map", f"at most {self.config.max_size} tiles a side (the env's max_size)",
                                 f"{len(rows)}x{len(rows[0])}")
            _check_tiles(meta, rows)
            square = len(rows) == len(rows[0])
            if "size" in meta and (not square or meta.integer("size", 2) != len(rows)):
                raise meta.error("size", f"the side of metadata.map ({len(rows)}x{len(rows[0])})", meta.values["size"])
            if square:
                recorded["size"] = len(rows)
            if "p" in meta:
                recorded["p"] = meta.number("p", 0.0)
        recorded.update(is_slippery=is_slippery, map=list(rows))
        self.map, self.is_slippery = rows, is_slippery
        env = FrozenLakeEnv(desc=rows, is_slippery=is_slippery)
        state, _ = env.reset(seed=seed)
        return Start(env=env, seed=seed, state=int(state), metadata=recorded)

    def instructions(self) -> str:
        n_rows, n_cols = len(self.map), len(self.map[0])
        slippery = (" The ice is slippery: you may slide to a side instead of where you chose."
                    if self.is_slippery else "")
        return (
            f"You play FrozenLake on a {n_rows}x{n_cols} grid: walk from S to the goal G without falling "
            f"into a hole. Rows are numbered 0-{n_rows - 1} from the top, columns 0-{n_cols - 1} from the left. "
            "Legend: P you, S start, F frozen ice (safe), H hole (ends the game), G goal. "
            f"Each action moves you one cell; moving off the grid leaves you in place.{slippery} "
            f"Reaching G gives reward 1, anything else 0. {self.answer_format()}"
        )

    def default_goal(self) -> str:
        return "Reach the goal G without falling into a hole."

    def describe(self, state: int, action: int | None = None, reward: float | None = None,
                 terminated: bool = False) -> str:
        row, col = self.cell(state)
        lines = [*mark(self.map, row, col, "P"), f"You are at row {row}, column {col}."]
        tile = self.map[row][col]
        if tile == "H":
            lines.append("You fell into a hole. The game is over.")
        elif tile == "G":
            lines.append("You reached the goal!")
        return "\n".join(lines)

    def cell(self, state: int) -> tuple[int, int]:
        return divmod(state, len(self.map[0]))

    def is_success(self, state: int) -> bool:
        row, col = self.cell(state)
        return self.map[row][col] == "G"

    def failure_text(self, state: int) -> str:
        row, col = self.cell(state)
        return f"fell into a hole at row {row}, column {col}"

    # --- exploration: valid actions, goals --------------------------------------------------

    def valid_action_indices(self, state: int) -> list[int]:
        """The moves that stay on the map (a move off it wastes a step)."""
        return moves_on_grid(state, len(self.map), len(self.map[0]), self.actions)

    def check_goal(self, task_id: str, goal: object) -> Goal:
        goal = check_goal_shape(task_id, goal, ["reach"])
        row, col = check_cell(task_id, goal, len(self.map), len(self.map[0]))
        if self.map[row][col] == "H":
            raise bad_goal(task_id, goal, "is a hole on this map")
        return goal

    def goal_query(self, goal: Goal) -> str:
        return f"Reach row {goal['row']}, column {goal['col']} of this map without falling into a hole."

    def goals_reached(self, start: int, before: int, action: int, after: int, reward: float) -> list[Goal]:
        """Each safe cell the player steps onto, except the start."""
        row, col = self.cell(after)
        if after == start or self.map[row][col] == "H":
            return []
        return [reach(row, col)]


def random_map(size: int, p: float, seed: int) -> list[str] | None:
    """gymnasium's `generate_random_map(size, p, seed)` (the same draws, so the same map), or None
    when none of the first `MAX_MAP_TRIES` maps has a path from S to G."""
    rng, _ = seeding.np_random(seed)
    for _ in range(MAX_MAP_TRIES):
        board = rng.choice(["F", "H"], (size, size), p=[p, 1 - p])
        board[0][0], board[-1][-1] = "S", "G"
        if is_valid(board, size):
            return ["".join(row) for row in board]
    return None


def _check_tiles(meta: TaskMetadata, rows: list[str]) -> None:
    tiles = "".join(rows)
    if set(tiles) - set(TILES) or tiles.count("S") != 1 or "G" not in tiles:
        raise meta.error("map", f"rows of {', '.join(TILES)} with one S and at least one G", rows)

