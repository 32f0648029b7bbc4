"""Taxi as text: drive to the passenger, pick them up, and drop them off at the destination.

One fixed 5x5 map with walls and four stops (R, G, Y, B). A task's seed fixes the start
(taxi position, passenger stop, destination) through gymnasium's reset; the task also records
that start as `metadata.state` (gymnasium's encoded state, 0-499), which wins when given, so
a task keeps its start even if a gymnasium release draws differently for the same seed.
Success: the passenger delivered (gymnasium's +20 and the end of its episode).

The observation is the map without its border, the taxi as T, and a line of positions::

    |R: | : :G|
    | : | : : |
    | : : :T: |
    | | : | : |
    |Y| : |B: |
    Taxi at row 2, column 3. Passenger waiting at Y (row 4, column 0). Destination: G (row 0, column 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from gymnasium.envs.toy_text import TaxiEnv
from gymnasium.envs.toy_text.taxi import MAP

from beyondagent_core import Task
from beyondagent_plugin_gym.base import Start, TextGymEnv
from beyondagent_plugin_gym.goals import Goal, check_cell, check_goal_shape, reach
from beyondagent_plugin_gym.metadata import TaskMetadata

STOPS: tuple[tuple[str, int, int], ...] = (("R", 0, 0), ("G", 0, 4), ("Y", 4, 0), ("B", 4, 3))
"""gymnasium's passenger locations and destinations, in its index order."""
IN_TAXI = 4
STATES = 500
PICKUP, DROPOFF = 4, 5
ILLEGAL_ACTION_REWARD = -10
GRID = MAP[1:-1]


class Taxi(TextGymEnv):
    name = "taxi"
    actions = ("south", "north", "east", "west", "pickup", "dropoff")
    synonyms: ClassVar[Mapping[str, str]] = {
        "down": "south", "up": "north", "right": "east", "left": "west", "pick up": "pickup", "drop off": "dropoff",
    }
    step_cost = -1.0
    success_text = "delivered the passenger"
    unfinished_text = "did not deliver the passenger"

    def start(self, task: Task) -> Start:
        meta = TaskMetadata(task, self.name)
        seed = meta.seed()
        recorded = meta.integer("state", 0, maximum=STATES - 1) if "state" in meta else None
        # The map never changes, so one gymnasium env serves every episode (reset reseeds it).
        env = self._gym if self._gym is not None else TaxiEnv()
        state, _ = env.reset(seed=seed)
        if recorded is not None:
            env.s = state = recorded  # gymnasium's Taxi has no reset option for a start state
        return Start(env=env, seed=seed, state=int(state), metadata={"seed": seed, "state": int(state)})

    def instructions(self) -> str:
        return (
            "You drive a taxi on a 5x5 map. Rows are numbered 0-4 from the top, columns 0-4 from the left. "
            "Legend: T taxi; R, G, Y, B stops; '|' a wall the taxi cannot cross; ':' no wall. "
            "south moves down a row, north up, east right a column, west left. Drive to the passenger's "
            "stop, pickup, drive to the destination stop, dropoff. Rewards: -1 per action, +20 for "
            "dropping the passenger at the destination, -10 for a pickup or dropoff that is not allowed. "
            f"{self.answer_format()}"
        )

    def default_goal(self) -> str:
        return "Pick up the passenger and drop them off at the destination."

    def describe(self, state: int, action: int | None = None, reward: float | None = None,
                 terminated: bool = False) -> str:
        row, col, passenger, destination = (int(x) for x in self._gym.decode(state))
        grid = list(GRID)
        grid[row] = grid[row][: 2 * col + 1] + "T" + grid[row][2 * col + 2:]
        where = f"Taxi at row {row}, column {col}"
        goal = f"Destination: {_stop(destination)}."
        if terminated:
            status = f"{where}. You delivered the passenger to {STOPS[destination][0]}!"
        elif passenger == IN_TAXI:
            status = f"{where}, carrying the passenger. {goal}"
        else:
            status = f"{where}. Passenger waiting at {_stop(passenger)}. {goal}"
        lines = [*grid, status]
        if action == PICKUP and reward == ILLEGAL_ACTION_REWARD:
            lines.append("There is no passenger here to pick up (-10).")
        elif action == DROPOFF and reward == ILLEGAL_ACTION_REWARD:
            lines.append("You cannot drop off here (-10).")
        elif action == DROPOFF and not terminated:
            lines.append(f"You dropped the passenger at {STOPS[passenger][0]}, which is not the destination.")
        return "\n".join(lines)

    # --- exploration: valid actions, goals --------------------------------------------------

    def valid_action_indices(self, state: int) -> list[int]:
        """gymnasium's action mask: moves not blocked by a wall or the edge, a pickup or dropoff that is allowed."""
        return [int(index) for index in self._gym.action_mask(state).nonzero()[0]]

    def cell(self, state: int) -> tuple[int, int]:
        row, col, _, _ = (int(x) for x in self._gym.decode(state))
        return row, col

    def check_goal(self, task_id: str, goal: object) -> Goal:
        goal = check_goal_shape(task_id, goal, ["reach", "pickup", "dropoff"])
        if goal["kind"] == "reach":
            check_cell(task_id, goal, 5, 5)
        elif goal["kind"] == "pickup" and set(goal) != {"kind"}:
            raise ValueError(f'task {task_id!r}: metadata.goal of kind pickup must be {{"kind": "pickup"}}, got {goal}')
        elif goal["kind"] == "dropoff" and (set(goal) != {"kind", "stop"} or goal["stop"] not in STOP_LETTERS):
            raise ValueError(f"task {task_id!r}: metadata.goal of kind dropoff must be "
                             f'{{"kind": "dropoff", "stop": one of {", ".join(STOP_LETTERS)}}}, got {goal}')
        return goal

    def goal_query(self, goal: Goal) -> str:
        if goal["kind"] == "reach":
            return f"Drive the taxi to row {goal['row']}, column {goal['col']}."
        if goal["kind"] == "pickup":
            return "Drive to the passenger and pick them up."
        return f"Pick up the passenger and drop them off at stop {_stop(STOP_LETTERS.index(goal['stop']))}."

    def goals_reached(self, start: int, before: int, action: int, after: int, reward: float) -> list[Goal]:
        """A cell the taxi drives onto (not its start cell), picking the passenger up, dropping them at a stop."""
        row0, col0, _, _ = self._gym.decode(start)
        row1, col1, passenger1, _ = self._gym.decode(before)
        row, col, passenger, _ = (int(x) for x in self._gym.decode(after))
        goals: list[Goal] = []
        if (row, col) != (row1, col1) and (row, col) != (row0, col0):
            goals.append(reach(row, col))
        if passenger1 != IN_TAXI and passenger == IN_TAXI:
            goals.append({"kind": "pickup"})
        if passenger1 == IN_TAXI and passenger != IN_TAXI:
            goals.append({"kind": "dropoff", "stop": STOP_LETTERS[passenger]})
        return goals


STOP_LETTERS: tuple[str, ...] = tuple(letter for letter, _, _ in STOPS)


def _stop(index: int) -> str:
    letter, row, col = STOPS[index]
    return f"{letter} (row {row}, column {col})"
