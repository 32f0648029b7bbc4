"""CliffWalking as text: walk along a cliff edge from S to G without stepping off it.

gymnasium's CliffWalking has one fixed 4x12 map and one start, so its tasks differ only in
what a seed can change: with `is_slippery` (the player moves in the chosen direction a third
of the time, else sideways) the seed fixes every slide; without it every task is the same
deterministic game, whatever its seed. Each move costs -1; stepping into the cliff costs -100
and sends the player back to S. Success: reaching G.

The observation is the grid, one row per line with the player as P, and where the player is::

    ............
    ............
    ............
    PCCCCCCCCCCG
    You are at row 3, column 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from gymnasium.envs.toy_text import CliffWalkingEnv

from beyondagent_core import Task
from beyondagent_plugin_gym.base import Start, TextGymEnv, mark, moves_on_grid
from beyondagent_plugin_gym.config import CliffWalkingConfig
from beyondagent_plugin_gym.goals import Goal, bad_goal, check_cell, check_goal_shape, reach
from beyondagent_plugin_gym.metadata import TaskMetadata

# gymnasium's layout, which it does not expose as data: a 4x12 grid, the cliff between start and goal.
GRID = ("." * 12, "." * 12, "." * 12, "S" + "C" * 10 + "G")
COLUMNS = 12
CLIFF_REWARD = -100


class CliffWalking(TextGymEnv):
    name = "cliffwalking"
    actions = ("up", "right", "down", "left")
    synonyms: ClassVar[Mapping[str, str]] = {"north": "up", "east": "right", "south": "down", "west": "left"}
    step_cost = -1.0

    def __init__(self, config: CliffWalkingConfig):
        super().__init__(config)
        self.is_slippery = config.is_slippery

    def start(self, task: Task) -> Start:
        meta = TaskMetadata(task, self.name)
        seed = meta.seed()
        self.is_slippery = meta.flag("is_slippery", self.config.is_slippery)
        env = CliffWalkingEnv(is_slippery=self.is_slippery)
        state, _ = env.reset(seed=seed)
        return Start(env=env, seed=seed, state=int(state),
                     metadata={"seed": seed, "is_slippery": self.is_slippery})

    def instructions(self) -> str:
        slippery = (" The ground is slippery: you may move sideways instead of where you chose."
                    if self.is_slippery else "")
        return (
            "You walk on a 4x12 grid from the start S (row 3, column 0) to the goal G (row 3, column 11). "
            "Rows are numbered 0-3 from the top, columns 0-11 from the left. "
            "Legend: P you, S start, G goal, C cliff, . safe ground. Each move costs -1; stepping into "
            "the cliff costs -100 and sends you back to S. Moving off the grid leaves you in place."
            f"{slippery} {self.answer_format()}"
        )

    def default_goal(self) -> str:
        return "Reach the goal G without stepping into the cliff."

    def describe(self, state: int, action: int | None = None, reward: float | None = None,
                 terminated: bool = False) -> str:
        row, col = self.cell(state)
        lines = [*mark(GRID, row, col, "P"), f"You are at row {row}, column {col}."]
        if reward == CLIFF_REWARD:
            lines.append("You fell off the cliff (-100) and are back at the start.")
        elif terminated:
            lines.append("You reached the goal!")
        return "\n".join(lines)

    # --- exploration: valid actions, goals --------------------------------------------------

    def valid_action_indices(self, state: int) -> list[int]:
        """The moves that stay on the grid (stepping into the cliff is allowed: exploring finds it)."""
        return moves_on_grid(state, len(GRID), COLUMNS, self.actions)

    def cell(self, state: int) -> tuple[int, int]:
        return divmod(state, COLUMNS)

    def check_goal(self, task_id: str, goal: object) -> Goal:
        goal = check_goal_shape(task_id, goal, ["reach"])
        row, col = check_cell(task_id, goal, len(GRID), COLUMNS)
        if GRID[row][col] == "C":
            raise bad_goal(task_id, goal, "is a cliff cell")
        return goal

    def goal_query(self, goal: Goal) -> str:
        return f"Reach row {goal['row']}, column {goal['col']} without stepping into the cliff."

    def goals_reached(self, start: int, before: int, action: int, after: int, reward: float) -> list[Goal]:
        """Each cell the player steps onto, except the start."""
        return [] if after in (start, before) else [reach(*self.cell(after))]

    def spoils_goals(self, before: int, action: int, after: int, reward: float) -> str | None:
        # Every goal says "without stepping into the cliff": a fall ends what the episode can still achieve.
        return "fell off the cliff" if reward == CLIFF_REWARD else None
