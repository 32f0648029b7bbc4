"""`react`: the generic text agent loop that environment plugins can reuse.

The env's reset messages (its system prompt and first observation) open the conversation;
then the model acts, the env observes, and so on until the env says the episode is over,
`max_turns` model turns have been taken, or the episode's token budget is spent. The env's
`evaluate()` gives the reward. One env step per model turn.
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
