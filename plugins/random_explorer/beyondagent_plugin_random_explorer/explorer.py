"""`random`: explore an env from a seed task's start, with an LLM or with random valid actions.

The engine hands over an opened env; `explore` resets it to the seed task (its initial state)
and takes up to `max_explore_step` steps, one action per step:

- `llm`: the model sees the explorer's instructions and the env's messages with the seed
  query masked (`prompt.py`), plus the actions valid now when the env lists them. A model
  call that still fails after the retries ends the exploration with what it has, and
  `metrics["stopped"]` / `metrics["llm_error"]` say why.
- `random_actions`: each action is drawn uniformly from `env.call("valid_actions")` with a
  `random.Random` seeded from the config seed, the seed task's id and the exploration's index
  (given by the caller as `explore(..., index=i)`, else how many explorations of that task
  this explorer started before), so a run explores the same way every time.

The trajectory records the env's reset messages (query masked), each action as an assistant
turn and each observation; after every step, `metrics["achieved"]` gains
`{"step": i, "goals": env.describe_achieved()}` (i actions taken so far) when the env offers
that method, which is what the `hindsight` summarizer reads.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import defaultdict
from typing import Any

import attrs

from beyondagent_core.errors import BeyondAgentError, EnvMethodMissing, RunError
from beyondagent_core.logs import get_logger
from beyondagent_core.protocols import AsyncEnv, ChatLLM, Message
from beyondagent_core.runtime.react import check_messages
from beyondagent_core.runtime.tokens import ContextLengthExceeded
from beyondagent_core.types import Task, Trajectory, Turn
from beyondagent_plugin_random_explorer.config import RandomExplorerConfig, check_config
from beyondagent_plugin_random_explorer.prompt import (
    explorer_messages,
    mask_query,
    valid_actions_note,
)

log = get_logger("beyondagent.random_explorer")


def exploration_seed(config_seed: int, task_id: str, index: int) -> int:
    """The RNG seed of the `index`-th exploration of `task_id` (stable across runs and machines)."""
    digest = hashlib.sha256(f"{config_seed}\0{task_id}\0{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class RandomExplorer:
    """The `Explorer` protocol: `await explore(seed, env, llm) -> Trajectory`."""

    def __init__(self, config: RandomExplorerConfig | None = None):
        config = config or RandomExplorerConfig()
        check_config(config)
        self.config = config
        self.sampling = {key: value for key in ("temperature", "top_p", "top_k", "max_tokens")
                         if (value := getattr(config, key)) is not None}
        self._started: defaultdict[str, int] = defaultdict(int)

    async def explore(self, seed: Task, env: AsyncEnv, llm: ChatLLM | None, *, index: int | None = None) -> Trajectory:
        """Explore from `seed`'s start. `index`: which exploration of this seed task it is, when the
        caller knows (the same draws on every machine and after a resume); else this explorer's count."""
        if index is None:
            index = self._started[seed.task_id]
        self._started[seed.task_id] = max(self._started[seed.task_id], index) + 1
        if self.config.mode == "llm" and llm is None:
            raise RunError("the random explorer in mode llm needs an LLM, but none is configured",
                           where="spec key explore.mode",
                           hint="set `llm` (an OpenAI-compatible endpoint) in the spec, or use "
                                "explore.mode: random_actions for envs that list their valid actions")
        reset = await env.reset(seed)
        shown = mask_query(check_messages(reset.messages, "reset()"), seed.query)
        run = _Exploration(env=env, turns=[Turn(role=m["role"], content=m["content"]) for m in shown])
        run.metrics.update(mode=self.config.mode, exploration=index)
        if self.config.mode == "random_actions":
            await self._random_actions(run, random.Random(exploration_seed(self.config.seed, seed.task_id, index)))
        else:
            await self._llm(run, llm, explorer_messages(shown))  # type: ignore[arg-type]
        run.metrics["steps"] = run.steps
        log.debug("explore.trajectory", seed=seed.task_id, **_summary(run.metrics))
        return Trajectory(task=seed, turns=run.turns, terminated=run.terminated, metrics=run.metrics)

    async def _random_actions(self, run: _Exploration, rng: random.Random) -> None:
        while run.steps < self.config.max_explore_step:
            actions = await run.valid_actions(required=True)
            if not actions:
                run.metrics["stopped"] = "no_valid_actions"
                return
            action = rng.choice(actions)
            await run.step(Turn(role="assistant", content=action))
            if run.terminated:
                run.metrics["stopped"] = "terminated"
                return
        run.metrics["stopped"] = "max_explore_step"

    async def _llm(self, run: _Exploration, llm: ChatLLM, conversation: list[Message]) -> None:
        run.metrics.update(llm_calls=0, llm_retries=0)
        actions = await run.valid_actions(required=False)
        if actions:
            conversation[-1] = {**conversation[-1], "content": conversation[-1]["content"] + valid_actions_note(actions)}
        while run.steps < self.config.max_explore_step:
            reply = await self._chat(run, llm, conversation)
            if reply is None:
                return
            conversation.append({"role": "assistant", "content": reply.content})
            observation = await run.step(reply)
            if run.terminated:
                run.metrics["stopped"] = "terminated"
                return
            actions = await run.valid_actions(required=False)
            if actions is not None and not actions:
                run.metrics["stopped"] = "no_valid_actions"
                return
            conversation.extend(observation)
            if actions and conversation[-1]["role"] != "assistant":
                conversation[-1] = {**conversation[-1], "content": conversation[-1]["content"] + valid_actions_note(actions)}
        run.metrics["stopped"] = "max_explore_step"

    async def _chat(self, run: _Exploration, llm: ChatLLM, conversation: list[Message]) -> Turn | None:
        """The model's next turn, retried; None (with the reason in the metrics) when it cannot be had."""
        for attempt in range(self.config.max_llm_retries + 1):
            run.metrics["llm_calls"] += 1
            try:
                reply = await llm.chat(conversation, **self.sampling)
            except ContextLengthExceeded as exc:
                return run.stop("context_length", exc)
            except BeyondAgentError as exc:  # the client already retried what was worth retrying
                return run.stop("llm_error", exc)
            except Exception as exc:
                if attempt == self.config.max_llm_retries:
                    return run.stop("llm_error", exc)
                run.metrics["llm_retries"] += 1
                log.info("explore.llm_retry", attempt=attempt + 1, error=f"{type(exc).__name__}: {exc}")
                # Exponential backoff with full jitter, so concurrent explorations do not retry in step.
                await asyncio.sleep(random.uniform(0, self.config.retry_backoff * 2**attempt))
                continue
            if not isinstance(reply, Turn) or not isinstance(reply.content, str):
                return run.stop("llm_error", TypeError(f"{type(llm).__name__}.chat() returned {type(reply).__name__}, "
                                                       "not a Turn with text content"))
            return reply
        return None  # unreachable: the last attempt returns


@attrs.define
class _Exploration:
    """One exploration in progress: the env, the turns recorded, and the metrics."""

    env: AsyncEnv
    turns: list[Turn]
    metrics: dict[str, Any] = attrs.field(factory=lambda: {"achieved": []})
    steps: int = 0
    terminated: bool = False
    describes_achieved: bool = True

    async def step(self, action: Turn) -> list[Message]:
        """Take one action; record it, the observation and what is achieved; return the observation."""
        step = await self.env.step({"role": "assistant", "content": action.content})
        observation = check_messages(step.observation, "step()")
        self.steps += 1
        self.terminated = bool(step.terminated)
        self.turns.append(action)
        self.turns.extend(Turn(role=m["role"], content=m["content"]) for m in observation)
        await self.record_achieved()
        return observation

    async def record_achieved(self) -> None:
        if not self.describes_achieved:
            return
        try:
            goals = await self.env.call("describe_achieved")
        except EnvMethodMissing:
            self.describes_achieved = False
            self.metrics["describes_achieved"] = False  # the env cannot say: not the same as "nothing achieved"
            return
        if not isinstance(goals, list):
            raise TypeError(f"env describe_achieved() must return a list, got {type(goals).__name__}")
        self.metrics["achieved"].append({"step": self.steps, "goals": goals})

    async def valid_actions(self, *, required: bool) -> list[str] | None:
        """The env's valid actions now; None when it cannot list them (an error if `required`)."""
        try:
            actions = await self.env.call("valid_actions")
        except EnvMethodMissing as exc:
            if required:
                raise RunError(f"mode random_actions needs an env that lists its valid actions; {exc}",
                               where="spec key explore.mode",
                               hint="use explore.mode: llm, or give the env a valid_actions() method") from None
            return None
        if not isinstance(actions, list) or not all(isinstance(action, str) for action in actions):
            raise TypeError(f"env valid_actions() must return a list of strings, got {actions!r:.80}")
        return actions

    def stop(self, reason: str, exc: BaseException) -> None:
        """End the exploration early: an LLM call could not be made."""
        text = str(exc).strip()
        self.metrics["stopped"] = reason
        self.metrics["llm_error"] = f"{type(exc).__name__}: {text.splitlines()[0] if text else '(no message)'}"
        log.warning("explore.stopped_early", reason=reason, steps=self.steps, error=self.metrics["llm_error"])


def _summary(metrics: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in metrics.items() if key != "achieved"}
