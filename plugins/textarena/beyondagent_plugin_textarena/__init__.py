"""BeyondAgent environments from TextArena's games (beyondagent-plugin-textarena).

Registers the env `textarena` (one of the one-player games that play offline: Sokoban, Minesweeper,
Sudoku, Tower of Hanoi, the 15-puzzle, Guess the Number, Mastermind, each at TextArena's
difficulties; and two-player games against an opponent inside the env, `opponents.py`: TicTacToe,
Connect Four, Nim and Kuhn Poker against a random legal move or an LLM endpoint, SimpleNegotiation and
the iterated prisoner's dilemma against an LLM endpoint; `env.py`) and the task source
`textarena_tasks` (seeded games of one game; `tasks.py`). The word games need a download and chess a
newer Python (config.py says which, and a spec naming one is refused with the reason).

Factories are `"module:attr"` strings: listing plugins imports only `config.py`, never textarena.
"""

from __future__ import annotations

from beyondagent_core import EnvSpec, TaskSourceSpec, hookimpl
from beyondagent_plugin_textarena.config import TextArenaConfig, TextArenaTasksConfig

__all__ = ["TextArenaConfig", "TextArenaTasksConfig", "beyondagent_envs", "beyondagent_task_sources"]


@hookimpl
def beyondagent_envs() -> list[EnvSpec]:
    return [EnvSpec(name="textarena", factory="beyondagent_plugin_textarena.env:TextArenaEnv",
                    config_cls=TextArenaConfig,
                    summary="TextArena's games as a chat: one-player (sokoban, minesweeper, sudoku, tower_of_hanoi, "
                            "fifteen_puzzle, guess_the_number, mastermind) and two-player against a random or "
                            "LLM opponent (tictactoe, connectfour, nim, kuhnpoker, simplenegotiation, "
                            "iteratedprisonersdilemma).")]


@hookimpl
def beyondagent_task_sources() -> list[TaskSourceSpec]:
    return [TaskSourceSpec(name="textarena_tasks", factory="beyondagent_plugin_textarena.tasks:TextArenaTasks",
                           config_cls=TextArenaTasksConfig,
                           summary="Seeded games of one TextArena game from a split's seed range.")]
