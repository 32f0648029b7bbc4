"""Small envs for the torch backend's tests, the plugin that registers them, and a spec builder.

The envs are real `Env` implementations (no doubles): a one-turn "say a word from this set"
game whose reward a tiny random model can learn, and a counting game for multi-turn runs, and a
two-seat duel of that word game (a multi-seat episode the policy plays on both sides).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from beyondagent_core import EnvReset, EnvSpec, EnvStep, Reward, Task, hookimpl

TARGET_WORDS = ("left", "right", "up", "down")


@attrs.define
class WordGameConfig:
    turns: int = 1
    system: bool = True  # without it, a chat template may add its own default system prompt


class WordGame:
    """Say one of TARGET_WORDS: reward 1 per turn whose reply contains one, averaged over turns."""

    def __init__(self, config: WordGameConfig):
        self.turns = config.turns
        self.system = config.system
        self.hits = 0
        self.taken = 0

    def reset(self, task: Task) -> EnvReset:
        self.hits = self.taken = 0
        system = [{"role": "system", "content": "Answer with one direction word."}] if self.system else []
        return EnvReset(messages=[*system, {"role": "user", "content": task.query or "Which way?"}])

    def step(self, action: dict[str, Any]) -> EnvStep:
        self.taken += 1
        hit = any(word in action["content"].lower() for word in TARGET_WORDS)
        self.hits += int(hit)
        done = self.taken >= self.turns
        return EnvStep(observation=[] if done else [{"role": "user", "content": "Again: which way?"}],
                       reward=float(hit), terminated=done)

    def evaluate(self) -> Reward:
        score = self.hits / max(self.taken, 1)
        return Reward(score=score, success=score == 1.0, reason=f"{self.hits}/{self.taken} turns named a direction")

    def close(self) -> None:
        pass


class BrokenObservation(WordGame):
    """Returns a number where the observation text should be."""

    def step(self, action: dict[str, Any]) -> EnvStep:
        super().step(action)
        return EnvStep(observation=[{"role": "user", "content": 42}], reward=0.0, terminated=False)


# What ran in which order: "env" for every `logged_word_game` step, and what a test adds (an update's
# start and end): the order the code's own waits guarantee, read without any clock.
EVENT_LOG: list[str] = []


class LoggedWordGame(WordGame):
    """The word game that logs each step it finished (EVENT_LOG)."""

    def step(self, action: dict[str, Any]) -> EnvStep:
        result = super().step(action)
        EVENT_LOG.append("env")  # list.append is atomic: rollout threads and the trainer share the log
        return result


@attrs.define
class WordDuelConfig:
    moves: int = 2  # each seat's


class WordDuel:
    """A two-seat game (`beyondagent_core.runtime.seats`): the seats take turns, `moves` each; the seat
    whose replies name more of TARGET_WORDS wins (1), an equal count draws (0.5 each). Each seat sees the
    other's last reply."""

    def __init__(self, config: WordDuelConfig):
        self.moves = config.moves
        self.hits = [0, 0]
        self.taken = [0, 0]
        self.seat = 0

    def reset(self, task: Task) -> EnvReset:
        self.hits, self.taken, self.seat = [0, 0], [0, 0], 0
        return EnvReset(messages=[{"role": "system", "content": "Answer with one direction word."},
                                  {"role": "user", "content": f"You are seat 0. {task.query or 'Which way?'}"}],
                        info={"seats": 2, "seat": 0})

    def step(self, action: dict[str, Any]) -> EnvStep:
        mover, other = self.seat, 1 - self.seat
        self.taken[mover] += 1
        self.hits[mover] += int(any(word in action["content"].lower() for word in TARGET_WORDS))
        done = min(self.taken) >= self.moves
        opening = "" if self.taken[other] else f"You are seat {other}. Which way? "
        self.seat = other
        return EnvStep(observation=[{"role": "user", "content": f"{opening}Seat {mover} said: {action['content']}"}],
                       reward=0.0, terminated=done, info={} if done else {"seat": other})

    def seat_rewards(self) -> list[dict[str, Any]]:
        mine, theirs = self.hits
        scores = (1.0, 0.0) if mine > theirs else (0.0, 1.0) if theirs > mine else (0.5, 0.5)
        return [Reward(score=score, success=score == 1.0, reason=f"{self.hits[seat]} of {self.taken[seat]} moves",
                       details={"seat": seat}).to_dict() for seat, score in enumerate(scores)]

    def evaluate(self) -> Reward:
        return Reward.from_dict(self.seat_rewards()[0])

    def close(self) -> None:
        pass


class EnvsForTests:
    @hookimpl
    def beyondagent_envs(self) -> list[EnvSpec]:
        return [
            EnvSpec(name="word_game", factory=WordGame, config_cls=WordGameConfig),
            EnvSpec(name="broken_observation", factory=BrokenObservation, config_cls=WordGameConfig),
            EnvSpec(name="logged_word_game", factory=LoggedWordGame, config_cls=WordGameConfig),
            EnvSpec(name="word_duel", factory=WordDuel, config_cls=WordDuelConfig),
        ]


def write_tasks(path: Path, count: int, prefix: str = "q") -> str:
    path.write_text("".join(json.dumps(Task(task_id=f"{prefix}{i}", query=f"Which way? ({i})").to_dict()) + "\n"
                            for i in range(count)))
    return str(path)


def word_game_spec(tmp_path: Path, **backend: Any) -> dict[str, Any]:
    """A spec training `tiny` on the word game; `backend` keys override the defaults here."""
    return {
        "run": {"name": "word", "seed": 0},
        "model": {"path": "tiny"},
        "tasks": {"train": {"name": "jsonl", "path": write_tasks(tmp_path / "train.jsonl", 8)},
                  "val": {"name": "jsonl", "path": write_tasks(tmp_path / "val.jsonl", 4, prefix="v")}},
        "env": {"name": "word_game"},
        "workflow": {"name": "react", "max_turns": 1},
        "mixture": {"name": "original"},
        "algorithm": {"group_size": 8, "kl_coef": 0.0},
        "backend": {"name": "torch", "device": "cpu", "batch_size": 4, "lr": 5e-3, "max_new_tokens": 4,
                    "max_episode_tokens": 128, "total_steps": 2, "micro_batch_size": 16, **backend},
        "plugins": {"require": []},
    }
