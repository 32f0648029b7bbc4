"""The `textarena` env: one of TextArena's one-player games (config.py's GAMES) as a multi-turn chat.

A task names its game in `metadata` (`game`, `difficulty`, `seed`; else the env's config and the
seed of its id, seeds.py). `reset` shows the game's rules and first board as the user's message;
`step` passes the assistant's reply to the game (cut to `max_action_chars`: the games read the move
in square brackets) and answers with what the game shows next. TextArena ends a game on a win, when
its turns run out, or after an invalid move past its error allowance; the score is the game's own
reward in [0, 1] (partial credit where the game gives it: Mastermind's pegs, Minesweeper's revealed
cells), success only when the game is won. The step reward is 0 until the game ends, then the score.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core.protocols import EnvReset, EnvStep, Message
from beyondagent_core.types import Reward, Task
from beyondagent_plugin_textarena.config import SPLIT_SIZE, SPLITS, TextArenaConfig, check_game
from beyondagent_plugin_textarena.games import make_game, new_text, turn_limit
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

    # --- the env contract ---------------------------------------------------------------------

    def reset(self, task: Task) -> EnvReset:
        self.close()
        metadata = task.metadata or {}
        parsed = parse_task_id(task.task_id)
        game = str(metadata.get("game") or (parsed[0] if parsed else self.config.game))
        difficulty = str(metadata.get("difficulty", self.config.difficulty if game == self.config.game else ""))
        check_game(game, difficulty)
        seed = metadata.get("seed")
        seed = int(seed) if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**63 \
            else seed_of(task.task_id)
        self._game = make_game(game, difficulty, seed)
        self._metadata = {"game": game, "difficulty": difficulty, "seed": seed}
        self._steps, self._result = 0, None
        own = turn_limit(self._game)
        self._limit = min(filter(None, (own, self.config.max_steps)), default=None)
        prompt = new_text(self._game, skip_actions=False)
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
        shown = new_text(self._game)
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

    def _finish(self) -> tuple[float, str]:
        """The game's reward for the player and its reason, once (TextArena's `close()` gives them)."""
        if self._result is None:
            rewards, info = self._game.close()
            value = rewards.get(0, 0.0) if isinstance(rewards, dict) else 0.0
            score = min(max(float(value), 0.0), 1.0) if isinstance(value, (int, float)) else 0.0
            reason = str((info or {}).get(0, {}).get("reason", "")) if isinstance(info, dict) else ""
            if not reason and self._limit is not None and self._steps >= self._limit:
                reason = f"no turns left ({self._limit})"
            self._result = (score, reason or "the game ended")
        return self._result
