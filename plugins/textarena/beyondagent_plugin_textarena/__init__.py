"""BeyondAgent environments from TextArena's games (beyondagent-plugin-textarena).

Registers the env `textarena` (one of the one-player games that play offline: Sokoban, Minesweeper,
Sudoku, Tower of Hanoi, the 15-puzzle, Guess the Number, Mastermind, each at TextArena's
difficulties; and the two-player TicTacToe, Connect Four, Nim and Kuhn Poker against the env's
random opponent, `opponents.py`; `env.py`) and the task source `textarena_tasks` (seeded games of one
game; `tasks.py`). The two-player games with free-text moves wait for multi-seat episodes; the word
games need a download (config.py says which, and a spec naming one is refused with the reason).

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
                            "fifteen_puzzle, guess_the_number, mastermind) and two-player against a random "
                            "opponent (tictactoe, connectfour, nim, kuhnpoker).")]


@hookimpl
def beyondagent_task_sources() -> list[TaskSourceSpec]:
    return [TaskSourceSpec(name="textarena_tasks", factory="beyondagent_plugin_textarena.tasks:TextArenaTasks",
                           config_cls=TextArenaTasksConfig,
                           summary="Seeded games of one TextArena game from a split's seed range.")]
