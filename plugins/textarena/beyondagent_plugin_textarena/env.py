"""The `textarena` env: one of TextArena's games (config.py's GAMES) as a multi-turn chat.

A task names its game in `metadata` (`game`, `difficulty`, `seed`; else the env's config and the
seed of its id, seeds.py). `reset` shows the game's rules and first board as the user's message;
`step` passes the assistant's reply to the game (cut to `max_action_chars`: the games read the move
in square brackets) and answers with what the game shows next. TextArena ends a game on a win, when
its turns run out, or after an invalid move past its error allowance; the score is the game's own
reward in [0, 1] (partial credit where the game gives it: Mastermind's pegs, Minesweeper's revealed
cells), success only when the game is won. The step reward is 0 until the game ends, then the score.

A two-player game is played against the env's opponent (`opponent: random`, a random legal move in
TicTacToe, Connect Four, Nim, Kuhn Poker; `opponent: llm`, a model at `opponent_llm`, in those and the
free-text SimpleNegotiation and prisoner's dilemma; opponents.py), the policy in `seat` (by default 0
on even seeds, 1 on odd):
the opponent's moves are made before the policy's first turn when it opens, and after each of the
policy's moves, and the policy sees them in the game's next message. TextArena's zero-sum reward
(+1 win, 0 draw, -1 loss; an invalid move past the allowance loses) becomes the score (r + 1) / 2,
so a draw scores 0.5; success is a win, and the reward's details say `outcome` (win, draw, loss;
`unfinished`, scoring 0, for a game cut by `max_steps`), `seat` and `opponent`.
"""

from __future__ import annotations

import random
from typing import Any

from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_core.types import Reward, Task
from beyondagent_plugin_textarena.config import (
    FREE_TEXT,
    SPLIT_SIZE,
    SPLITS,
    TWO_PLAYER,
    TextArenaConfig,
    check_game,
    check_opponent,
)
from beyondagent_plugin_textarena.games import make_game, new_text, to_move, turn_limit
from beyondagent_plugin_textarena.opponents import LLMOpponent, random_move
from beyondagent_plugin_textarena.seeds import parse_task_id, seed_of, task_id


class TextArenaEnv:
    """One game at a time (see the module docstring)."""

    def __init__(self, config: TextArenaConfig | None = None):
        self.config = config or TextArenaConfig()
        self._game: Any = None
        self._metadata: dict[str, Any] = {}
        self._steps = 0
        self._limit: int | None = None
        self._result: tuple[float, str] | None = None  # (score, the game's reason) once it ended
        self._seat = 0  # the policy's
        self._opponent: random.Random | None = None  # a two-player game's random opponent's moves
        self._llm_opponent: LLMOpponent | None = None  # or its LLM opponent

    # --- the env contract ---------------------------------------------------------------------

    def reset(self, task: Task) -> EnvReset:
        self.close()
        metadata = task.metadata or {}
        parsed = parse_task_id(task.task_id)
        game = str(metadata.get("game") or (parsed[0] if parsed else self.config.game))
        difficulty = str(metadata.get("difficulty", self.config.difficulty if game == self.config.game else ""))
        check_game(game, difficulty)
        check_opponent(game, self.config.opponent)
        seed = metadata.get("seed")
        seed = int(seed) if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**63 \
            else seed_of(task.task_id)
        self._game = make_game(game, difficulty, seed)
        self._metadata = {"game": game, "difficulty": difficulty, "seed": seed}
        self._steps, self._result, self._seat, self._opponent, self._llm_opponent = 0, None, 0, None, None
        if game in TWO_PLAYER:
            self._seat = self.config.seat if self.config.seat is not None else seed % 2
            self._opponent = random.Random(seed)
            if self.config.opponent == "llm":
                self._llm_opponent = LLMOpponent(self.config.opponent_llm, seed=seed)
            self._metadata.update(seat=self._seat, opponent=self.config.opponent)
        own = turn_limit(self._game)
        self._limit = min(filter(None, (own, self.config.max_steps)), default=None)
        done = self._opponent_moves()
        prompt = new_text(self._game, self._seat, others=game in FREE_TEXT)
        if done:  # the opponent ended the game before the policy's first move (it cannot, in these games)
            raise RuntimeError(f"the {game} game ended before the policy's first move")
        return EnvReset(messages=[{"role": "user", "content": prompt}],
                        info={"metadata": dict(self._metadata), "max_steps": self._limit})

    def step(self, action: Message) -> EnvStep:
        if self._game is None:
            raise RuntimeError("step() before reset()")
        if self._result is not None:
            return EnvStep(observation=[{"role": "user", "content": "The game is over."}], reward=0.0,
                           terminated=True, info={"metadata": dict(self._metadata)})
        content = action.get("content") if isinstance(action, dict) else None
        text = content if isinstance(content, str) else ""
        done, _ = self._game.step(text[: self.config.max_action_chars])
        self._steps += 1
        if not done:
            done = self._opponent_moves()
        shown = new_text(self._game, self._seat, others=self._metadata["game"] in FREE_TEXT)
        truncated = not done and self._limit is not None and self._steps >= self._limit
        reward = 0.0
        if done or truncated:
            score, reason = self._finish()
            reward = score
            shown = "\n\n".join(filter(None, [shown, f"Game over: {reason}"]))
        return EnvStep(observation=[{"role": "user", "content": shown or "(nothing changed)"}], reward=reward,
                       terminated=bool(done) or truncated,
                       info={"metadata": dict(self._metadata), "steps": self._steps, "truncated": truncated})

    def evaluate(self) -> Reward:
        if self._result is None:
            return Reward(score=0.0, success=False, reason="the game has not ended", details=dict(self._metadata))
        score, reason = self._result
        return Reward(score=score, success=score >= 1.0, reason=reason, details=dict(self._metadata))

    def close(self) -> None:
        if self._game is not None and self._result is None:
            try:
                self._game.close()
            except Exception:  # noqa: BLE001 - a game that cannot close has nothing left to free
                pass
        self._game = None

    def task_ids(self, split: str) -> list[str]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        count = min(self.config.tasks_per_split, SPLIT_SIZE)
        return [task_id(self.config.game, split, index) for index in range(count)]

    # --- helpers ---------------------------------------------------------------------------------

    def _opponent_moves(self) -> bool:
        """The opponent's moves until it is the policy's turn; whether the game ended."""
        if self._opponent is None:
            return False
        game = self._metadata["game"]
        while to_move(self._game) != self._seat:
            shown = new_text(self._game, to_move(self._game), others=game in FREE_TEXT)
            move = (self._llm_opponent.move(shown) if self._llm_opponent is not None
                    else random_move(game, self._game, shown, self._opponent))
            done, _ = self._game.step(move[: self.config.max_action_chars])
            if done:
                return True
        return False

    def _finish(self) -> tuple[float, str]:
        """The game's reward for the policy and its reason, once (TextArena's `close()` gives them)."""
        if self._result is None:
            rewards, info = self._game.close()
            seat = self._seat
            value = rewards.get(seat, 0.0) if isinstance(rewards, dict) else 0.0
            value = float(value) if isinstance(value, (int, float)) else 0.0
            if self._opponent is not None and not (isinstance(rewards, dict) and seat in rewards):
                self._metadata["outcome"] = "unfinished"  # cut by max_steps: no result, and no reward for stalling
            elif self._opponent is not None:  # zero-sum: +1 win, 0 draw, -1 loss
                self._metadata["outcome"] = "win" if value > 0 else "loss" if value < 0 else "draw"
                value = (value + 1.0) / 2.0
            score = min(max(value, 0.0), 1.0)
            reason = str((info or {}).get(seat, {}).get("reason", "")) if isinstance(info, dict) else ""
            if not reason and self._limit is not None and self._steps >= self._limit:
                reason = f"no turns left ({self._limit})"
            self._result = (score, reason or "the game ended")
        return self._result
