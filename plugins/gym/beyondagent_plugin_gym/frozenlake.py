"""FrozenLake as text: walk from S to the goal G over frozen tiles without falling into a hole.

A task's map is `metadata.map` when given, else gymnasium's `generate_random_map(size, p,
seed)`, so distinct seeds give distinct maps (tiny maps repeat: a 2x2 map has three possible
layouts). With `is_slippery` the seed also fixes where the ice slides. Success: reaching G
(gymnasium's reward 1).

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
from gymnasium.envs.toy_text.frozen_lake import generate_random_map

from beyondagent_core import Task
from beyondagent_plugin_gym.base import Start, TextGymEnv, mark, moves_on_grid
from beyondagent_plugin_gym.config import FrozenLakeConfig, check_frozenlake_config
from beyondagent_plugin_gym.goals import Goal, bad_goal, check_cell, check_goal_shape, reach
from beyondagent_plugin_gym.metadata import TaskMetadata

TILES = "SFHG"


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
            rows = [str(row) for row in generate_random_map(size=size, p=p, seed=seed)]
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
        row, col = divmod(state, len(self.map[0]))
        lines = [*mark(self.map, row, col, "P"), f"You are at row {row}, column {col}."]
        tile = self.map[row][col]
        if tile == "H":
            lines.append("You fell into a hole. The game is over.")
        elif tile == "G":
            lines.append("You reached the goal!")
        return "\n".join(lines)

    def is_success(self, state: int) -> bool:
        row, col = divmod(state, len(self.map[0]))
        return self.map[row][col] == "G"

    def failure_text(self, state: int) -> str:
        row, col = divmod(state, len(self.map[0]))
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
        row, col = divmod(after, len(self.map[0]))
        if after == start or self.map[row][col] == "H":
            return []
        return [reach(row, col)]


def _check_tiles(meta: TaskMetadata, rows: list[str]) -> None:
    tiles = "".join(rows)
    if set(tiles) - set(TILES) or tiles.count("S") != 1 or "G" not in tiles:
        raise meta.error("map", f"rows of {', '.join(TILES)} with one S and at least one G", rows)

