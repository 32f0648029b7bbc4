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

`opponent: self` is self-play: the env plays no seat itself and its episode has two seats
(`beyondagent_core.runtime.seats`): reset's info says `seats: 2` and the `seat` that opens, each step is
the move of the seat whose turn it is and shows the next seat what it has not yet seen, and
`seat_rewards()` scores both seats as above (`evaluate()` gives seat 0's). A task's metadata may name its
own `opponent` (a validation set against `random` while training plays `self`).
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
        self._results: list[tuple[float, str]] | None = None  # per seat (score, the game's reason), once it ended
        self._seat = 0  # the policy's (in self-play, where both are: evaluate() gives seat 0's reward)
        self._selfplay = False
        self._outcomes: list[str] = []  # per seat, a two-player game's win, draw, loss or unfinished
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
        opponent = str(metadata.get("opponent") or self.config.opponent)
        check_opponent(game, opponent, self.config)
        seed = metadata.get("seed")
        seed = int(seed) if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**63 \
            else seed_of(task.task_id)
        self._game = make_game(game, difficulty, seed)
        self._metadata = {"game": game, "difficulty": difficulty, "seed": seed}
        self._steps, self._results, self._seat, self._opponent, self._llm_opponent = 0, None, 0, None, None
        self._selfplay = game in TWO_PLAYER and opponent == "self"
        if self._selfplay:
            self._metadata.update(opponent=opponent)
        elif game in TWO_PLAYER:
            self._seat = self.config.seat if self.config.seat is not None else seed % 2
            self._opponent = random.Random(seed)
            if opponent == "llm":
                self._llm_opponent = LLMOpponent(self.config.opponent_llm, seed=seed)
            self._metadata.update(seat=self._seat, opponent=opponent)
        own = turn_limit(self._game)
        self._limit = min(filter(None, (own, self.config.max_steps)), default=None)
        done = self._opponent_moves()
        if done:  # the opponent ended the game before the policy's first move (it cannot, in these games)
            raise RuntimeError(f"the {game} game ended before the policy's first move")
        info: dict[str, Any] = {"metadata": dict(self._metadata), "max_steps": self._limit}
        if self._selfplay:
            self._seat = to_move(self._game)
            info.update(seats=2, seat=self._seat)
        prompt = new_text(self._game, self._seat, others=game in FREE_TEXT)
        return EnvReset(messages=[{"role": "user", "content": prompt}], info=info)

    def step(self, action: Message) -> EnvStep:
        if self._game is None:
            raise RuntimeError("step() before reset()")
        if self._results is not None:
            return EnvStep(observation=[{"role": "user", "content": "The game is over."}], reward=0.0,
                           terminated=True, info={"metadata": dict(self._metadata)})
        content = action.get("content") if isinstance(action, dict) else None
        text = content if isinstance(content, str) else ""
        mover = self._seat
        done, _ = self._game.step(text[: self.config.max_action_chars])
        self._steps += 1
        if not done:
            done = self._opponent_moves()
        if self._selfplay and not done:
            self._seat = to_move(self._game)  # the seat that moves next sees what it has not seen yet
        shown = new_text(self._game, self._seat, others=self._metadata["game"] in FREE_TEXT)
        truncated = not done and self._limit is not None and self._steps >= self._limit
        reward = 0.0
        if done or truncated:
            score, reason = self._finish()[mover]
            reward = score
            shown = "\n\n".join(filter(None, [shown, f"Game over: {reason}"]))
        info: dict[str, Any] = {"metadata": dict(self._metadata), "steps": self._steps, "truncated": truncated}
        if self._selfplay:
            info["seat"] = self._seat
        return EnvStep(observation=[{"role": "user", "content": shown or "(nothing changed)"}], reward=reward,
                       terminated=bool(done) or truncated, info=info)

    def evaluate(self) -> Reward:
        return self._reward(0 if self._selfplay else self._seat)

    def seat_rewards(self) -> list[dict[str, Any]]:
        """Each seat's reward, as `Reward.to_dict()` (self-play; a game against the env's own opponent
        has one seat, the policy's)."""
        seats = range(2) if self._selfplay else [self._seat]
        return [self._reward(seat).to_dict() for seat in seats]

    def close(self) -> None:
        if self._game is not None and self._results is None:
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

    def _reward(self, seat: int) -> Reward:
        details = {**self._metadata, **({"seat": seat} if self._selfplay else {})}
        if self._results is None:
            return Reward(score=0.0, success=False, reason="the game has not ended", details=details)
        score, reason = self._results[seat]
        if self._metadata["game"] in TWO_PLAYER:
            details["outcome"] = self._outcomes[seat]
        return Reward(score=score, success=score >= 1.0, reason=reason, details=details)

    def _finish(self) -> list[tuple[float, str]]:
        """Each seat's score and the game's reason for it, once (TextArena's `close()` gives them). A
        two-player game's zero-sum reward (+1 win, 0 draw, -1 loss) scores (r + 1) / 2, and its
        `outcome` is kept; a game cut by `max_steps` has none: `unfinished`, and no reward for stalling."""
        if self._results is None:
            rewards, info = self._game.close()
            two_player = self._metadata["game"] in TWO_PLAYER
            self._results, self._outcomes = [], []
            for seat in range(2 if two_player else 1):
                value = rewards.get(seat, 0.0) if isinstance(rewards, dict) else 0.0
                value = float(value) if isinstance(value, (int, float)) else 0.0
                outcome = ""
                if two_player and not (isinstance(rewards, dict) and seat in rewards):
                    outcome = "unfinished"
                elif two_player:
                    outcome = "win" if value > 0 else "loss" if value < 0 else "draw"
                    value = (value + 1.0) / 2.0
                reason = str((info or {}).get(seat, {}).get("reason", "")) if isinstance(info, dict) else ""
                if not reason and self._limit is not None and self._steps >= self._limit:
                    reason = f"no turns left ({self._limit})"
                self._results.append((min(max(value, 0.0), 1.0), reason or "the game ended"))
                self._outcomes.append(outcome)
            if two_player and not self._selfplay:
                self._metadata["outcome"] = self._outcomes[self._seat]
        return self._results
