"""`react`: the generic text agent loop that environment plugins can reuse.

The env's reset messages (its system prompt and first observation) open the conversation;
then the model acts, the env observes, and so on until the env says the episode is over,
`max_turns` model turns have been taken, or the episode's token budget is spent. The env's
`evaluate()` gives the reward. One env step per model turn.

An env whose episode has several seats (a two-player game played by the policy on both sides) is
played by `run_seats`: each seat its own conversation and reward (`beyondagent_core.runtime.seats`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from beyondagent_core.checks import (
    FRACTION_WHY,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_TURNS,
    TEMPERATURE_WHY,
    TOKENS_WHY,
    TURNS_WHY,
    number,
)
from beyondagent_core.protocols import AsyncEnv, ChatLLM, EnvReset, EnvStep, Message
from beyondagent_core.runtime.seats import SeatLLM, refuse_seats, seat_in, seat_rewards, seats_in
from beyondagent_core.runtime.tokens import ContextLengthExceeded
from beyondagent_core.types import Task, Trajectory, Turn


@attrs.define
class ReactConfig:
    """`max_turns`: model turns per episode. Sampling keys left unset use the backend's."""

    max_turns: int = attrs.field(default=10, validator=number(ge=1, le=MAX_TURNS, why=TURNS_WHY))
    temperature: float | None = attrs.field(default=None, validator=number(ge=0, le=MAX_TEMPERATURE,
                                                                           why=TEMPERATURE_WHY))
    top_p: float | None = attrs.field(default=None, validator=number(gt=0, le=1, why=FRACTION_WHY))
    max_tokens: int | None = attrs.field(default=None, validator=number(ge=1, le=MAX_TOKENS, why=TOKENS_WHY))


class ReactWorkflow:
    def __init__(self, config: ReactConfig | None = None):
        config = config or ReactConfig()
        if config.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {config.max_turns}")
        self.config = config
        self.sampling = {key: value for key, value in attrs.asdict(config).items()
                         if key != "max_turns" and value is not None}

    def opening(self, reset: EnvReset) -> list[Message]:
        """The conversation's first messages: the env's (a subclass may put its own prompt first)."""
        return check_messages(reset.messages, "reset()")

    def step_metrics(self, steps: list[EnvStep]) -> dict[str, Any]:
        """Per-episode metrics from the env's steps: the sum of the env's step rewards."""
        return {"env_reward": sum(float(step.reward) for step in steps)}

    async def run(self, task: Task, env: AsyncEnv, llm: ChatLLM) -> Trajectory:
        reset = await env.reset(task)
        seats = seats_in(reset.info)
        if seats > 1:
            raise refuse_seats(seats)
        return await self.play(task, env, llm, reset)

    async def run_seats(self, task: Task, env: AsyncEnv, seat_llm: SeatLLM) -> list[Trajectory]:
        """One trajectory per seat of the env's episode (`beyondagent_core.runtime.seats`); a one-seat
        env's episode is played as `run` plays it, by `seat_llm(0)`."""
        reset = await env.reset(task)
        seats = seats_in(reset.info)
        if seats == 1:
            return [await self.play(task, env, seat_llm(0, seats=1), reset)]
        return await self.play_seats(task, env, seat_llm, reset, seats)

    async def play(self, task: Task, env: AsyncEnv, llm: ChatLLM, reset: EnvReset) -> Trajectory:
        """The episode the env's `reset` opened, played by `llm` (one seat)."""
        messages = self.opening(reset)
        turns = [Turn(role=m["role"], content=m["content"]) for m in messages]
        terminated, truncated, model_turns, steps = False, False, 0, []
        while model_turns < self.config.max_turns:
            try:
                reply = await llm.chat(messages, **self.sampling)
            except ContextLengthExceeded:
                truncated = True
                break
            model_turns += 1
            turns.append(reply)
            action = {"role": "assistant", "content": reply.content}
            messages.append(action)
            step = await env.step(action)
            steps.append(step)
            for message in check_messages(step.observation, "step()"):
                messages.append(message)
                turns.append(Turn(role=message["role"], content=message["content"]))
            if step.terminated:
                terminated = True
                break
        reward = await env.evaluate()
        metrics = {"turns": model_turns, **self.step_metrics(steps), "truncated": truncated}
        return Trajectory(task=task, turns=turns, reward=reward, terminated=terminated, metrics=metrics)

    async def play_seats(self, task: Task, env: AsyncEnv, seat_llm: SeatLLM, reset: EnvReset,
                         seats: int) -> list[Trajectory]:
        """A multi-seat episode: each seat's model sees its own conversation (what the env showed that
        seat, and its own moves) and takes up to `max_turns` turns; the episode ends when the env says
        so, when the seat to move has no turns left, or when its context is full. Every seat is shown
        the env's last observation; each seat's reward is the env's `seat_rewards()`."""
        seat = seat_in(reset.info, seats, "reset()")
        conversations: list[list[Message]] = [[] for _ in range(seats)]
        turns: list[list[Turn]] = [[] for _ in range(seats)]
        unseen: list[list[Message]] = [[] for _ in range(seats)]  # shown to a seat when it moves next
        steps: list[list[EnvStep]] = [[] for _ in range(seats)]
        model_turns = [0] * seats
        unseen[seat] = self.opening(reset)
        terminated, truncated = False, False
        while model_turns[seat] < self.config.max_turns:
            conversations[seat] += unseen[seat]
            turns[seat] += [Turn(role=m["role"], content=m["content"]) for m in unseen[seat]]
            unseen[seat] = []
            try:
                reply = await seat_llm(seat, seats=seats).chat(conversations[seat], **self.sampling)
            except ContextLengthExceeded:
                truncated = True
                break
            model_turns[seat] += 1
            turns[seat].append(reply)
            action = {"role": "assistant", "content": reply.content}
            conversations[seat].append(action)
            step = await env.step(action)
            steps[seat].append(step)
            observation = check_messages(step.observation, "step()")
            if step.terminated:
                terminated = True
                for seat_turns in turns:  # the game's end, for every seat's record
                    seat_turns += [Turn(role=m["role"], content=m["content"]) for m in observation]
                break
            seat = seat_in(step.info, seats, "step()")
            unseen[seat] += observation
        rewards = await seat_rewards(env, seats)
        return [Trajectory(task=task, turns=turns[k], reward=rewards[k], terminated=terminated, seat=k,
                           metrics={"turns": model_turns[k], **self.step_metrics(steps[k]), "truncated": truncated})
                for k in range(seats)]


def check_messages(messages: Any, where: str) -> list[Message]:
    """The env's messages as a list of `{"role": str, "content": str}`; a TypeError says what is wrong."""
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        raise TypeError(f"env {where} must give a list of messages, got {type(messages).__name__}")
    checked = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"env {where} message {index} is {type(message).__name__}, not a dict")
        content = message.get("content")
        if not isinstance(content, str):
            raise TypeError(f"env {where} returned a non-string observation: message {index} content is "
                            f"{type(content).__name__} ({str(content)[:40]!r})")
        if not isinstance(message.get("role"), str):
            raise TypeError(f"env {where} message {index} has no string 'role'")
        checked.append(dict(message))
    return checked
