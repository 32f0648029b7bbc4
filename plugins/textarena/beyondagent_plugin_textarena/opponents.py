"""The opponents the `textarena` env plays a two-player game against, inside the env.

`random`: a uniformly random legal move, drawn from the game's own state (TicTacToe's free cells,
Connect Four's open columns, Nim's piles) or, where the game lists them, from the actions it offers
("Your available actions are: '[check]', '[bet]'" in Kuhn Poker). It plays from a generator seeded by
the task's seed, so a task replays the same opponent.

`llm` (`LLMOpponent`): a model at any OpenAI-compatible endpoint (`opponent_llm`), shown the game as
its seat sees it, one chat for the whole game (the game's messages as user turns, its moves as
assistant turns); its reply is the move. It plays every game, the free-text ones too.

The policy plays the other seat. `self` is no opponent inside the env: the policy plays both seats
(self-play, a multi-seat episode: env.py).
"""

from __future__ import annotations

import random
import re
from typing import Any

OPPONENTS = ("random", "llm", "self")
_OFFERED = re.compile(r"'(\[[^\]']{1,40}\])'")


def random_move(game: str, env: Any, shown: str, rng: random.Random) -> str:
    """A uniformly random legal move of `game` in the state of `env`; `shown` is what the game just
    showed the opponent (where the game lists its legal actions)."""
    state = env.state.game_state
    if game == "tictactoe":
        board = state["board"]
        free = [row * 3 + col for row in range(3) for col in range(3) if not board[row][col]]
        return f"[{rng.choice(free)}]"
    if game == "connectfour":
        columns = [col for col, cell in enumerate(state["board"][0]) if cell == "."]
        return f"[col {rng.choice(columns)}]"
    if game == "nim":
        piles = [(index, size) for index, size in enumerate(state["piles"]) if size > 0]
        pile, size = rng.choice(piles)
        return f"[{pile} {rng.randint(1, size)}]"
    offered = _OFFERED.findall(shown.rsplit("available actions", 1)[-1])
    if not offered:
        raise RuntimeError(f"the {game} game offered the opponent no action to choose from: {shown[-300:]!r}")
    return rng.choice(offered)


class LLMOpponent:
    """One game's opponent at an OpenAI-compatible endpoint: its chat so far, a reply per move."""

    def __init__(self, config: Any, *, seed: int):
        from beyondagent_core.llm import OpenAIChat

        self.llm = OpenAIChat(config, key_path="env.opponent_llm")
        self.seed = seed
        self.messages: list[dict[str, str]] = []

    def move(self, shown: str) -> str:
        """The model's reply to what the game showed it since its last move (run in the env's thread)."""
        import asyncio

        self.messages.append({"role": "user", "content": shown or "(your move)"})
        turn = asyncio.run(self.llm.chat(self.messages, seed=self.seed))
        self.messages.append({"role": "assistant", "content": turn.content or ""})
        return turn.content or ""
