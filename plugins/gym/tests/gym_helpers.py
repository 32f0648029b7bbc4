"""Shared by the gym plugin's tests: shortest solutions computed by BFS, and playing them."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from gymnasium.envs.toy_text.taxi import MAP as TAXI_MAP

from beyondagent_core import EnvStep

Node = TypeVar("Node", bound=Hashable)

GRID_MOVES = {"left": (0, -1), "down": (1, 0), "right": (0, 1), "up": (-1, 0)}
TAXI_MOVES = {"south": (1, 0), "north": (-1, 0), "east": (0, 1), "west": (0, -1)}
TAXI_STOPS = [(0, 0), (0, 4), (4, 0), (4, 3)]


def bfs(start: Node, is_goal: Callable[[Node], bool],
        moves: Callable[[Node], Iterable[tuple[str, Node]]]) -> list[str]:
    """The action names of a shortest path from `start` to a goal node."""
    came: dict[Node, tuple[Node, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if is_goal(node):
            path: list[str] = []
            while came[node] is not None:
                node, action = came[node]  # type: ignore[misc]
                path.append(action)
            return path[::-1]
        for action, nxt in moves(node):
            if nxt not in came:
                came[nxt] = (node, action)
                queue.append(nxt)
    raise AssertionError("no path to the goal")


def frozenlake_path(rows: Sequence[str]) -> list[str]:
    """The shortest safe walk from S to G on a FrozenLake map."""
    start = next((r, c) for r, row in enumerate(rows) for c, tile in enumerate(row) if tile == "S")

    def moves(cell: tuple[int, int]) -> Iterable[tuple[str, tuple[int, int]]]:
        for action, (dr, dc) in GRID_MOVES.items():
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < len(rows) and 0 <= c < len(rows[0]) and rows[r][c] != "H":
                yield action, (r, c)

    return bfs(start, lambda cell: rows[cell[0]][cell[1]] == "G", moves)


def taxi_drive(start: tuple[int, int], goal: tuple[int, int]) -> list[str]:
    """The shortest drive between two Taxi cells, respecting the walls of gymnasium's map."""

    def moves(cell: tuple[int, int]) -> Iterable[tuple[str, tuple[int, int]]]:
        row, col = cell
        for action, (dr, dc) in TAXI_MOVES.items():
            r, c = row + dr, col + dc
            if not (0 <= r < 5 and 0 <= c < 5):
                continue
            wall_column = 2 * col + 2 if dc > 0 else 2 * col
            if dc and TAXI_MAP[row + 1][wall_column] == "|":
                continue
            yield action, (r, c)

    return bfs(start, lambda cell: cell == goal, moves)


def play(env: Any, actions: Sequence[str], template: str = "Action: {}") -> list[EnvStep]:
    """Send each action as an assistant message; stop early when the episode ends."""
    steps = []
    for action in actions:
        steps.append(env.step({"role": "assistant", "content": template.format(action)}))
        if steps[-1].terminated:
            break
    return steps


def text(step: EnvStep) -> str:
    return step.observation[0]["content"]
