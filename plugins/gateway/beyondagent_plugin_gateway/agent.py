"""`agent`: train an agent written with any framework, unchanged, through the OpenAI-compatible gateway.

    workflow: {name: agent, entrypoint: "my_agents.frozenlake:run", timeout: 120}

`entrypoint` names a function `run(task, llm_base_url, env, api_key)`, sync or async:
"package.module:run", or "path/to/agent.py:run" (relative to the current directory). The agent
talks to the policy with any OpenAI client pointed at `llm_base_url` with `api_key` (one URL and
one key per episode: the gateway answers only calls with the episode's key; any model name), and
to its environment through `env`: the episode's env, opened by the run (local or
over the env service) — an async env (`await env.step(...)`) for an async function, the same
methods called synchronously for a sync one. Either runs in a thread of its own (an async one on an
event loop of its own), never on the rollout's loop, which the policy's decode steps hold. Its reward, in
order: what `run` returns (a number, a `Reward`, or a dict with `score`), else what it posted to
`<llm_base_url minus /v1>/reward`, else the env's `evaluate()`; a judge named in the spec
(`reward`) scores the episode only when the agent gave no reward itself. A score the agent gives
must be a finite number within +-1e6 (`gateway.api.REWARD_LIMIT`): anything else (NaN, inf,
1e308, returned or posted) fails the episode with an error naming the agent.

An agent that raises, runs past `timeout` seconds or returns without calling the model ends its
episode with an error naming the cause; the backend's failure policy counts it
(`backend.max_failed_fraction`). After a timeout the episode's URL answers 410, so a sync agent
still running in its thread fails at its next model call.

With `seats: N` (> 1) the agent plays every seat of a multi-seat env (self-play:
`beyondagent_core.runtime.seats`): `llm_base_url` and `api_key` are lists, one endpoint per seat,
each its own gateway episode (its calls become that seat's training samples), and its reward, in
order: a list of N rewards `run` returns, else the env's `seat_rewards()`.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.util
import inspect
import math
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from beyondagent_plugin_gateway.api import MAX_REASON_CHARS, REWARD_LIMIT, reward_score
from beyondagent_core.protocols import AsyncEnv, ChatLLM
from beyondagent_plugin_gateway.config import AgentConfig
from beyondagent_core.runtime.answer_leaks import AnswerLeakGuard
from beyondagent_core.runtime.seats import SeatLLM, refuse_seats, seat_rewards
from beyondagent_core.types import Reward, Task, Trajectory


class AgentError(RuntimeError):
    """The agent of an episode failed: raised, timed out, or never called the model."""


def load_entrypoint(entrypoint: str, where: str = "workflow.entrypoint") -> Callable[..., Any]:
    """The function `entrypoint` ("module:function") names; a ValueError says what is wrong and where."""
    module_name, _, attribute = str(entrypoint).rpartition(":")
    if not module_name or not attribute:
        raise ValueError(f"{where} must be 'package.module:function' or 'path/to/file.py:function', "
                         f"got {entrypoint!r}")
    try:
        module = _import(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix, said once
        hint = "does the file exist (relative to the current directory)?" if module_name.endswith(".py") \
            else "is it installed, or on PYTHONPATH?"
        raise ValueError(f"{where}: cannot import {module_name!r} ({type(exc).__name__}: {exc}); {hint}") from exc
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ValueError(f"{where}: module {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{where}: {entrypoint!r} is a {type(target).__name__}, not a function")
    return target


def _import(name: str) -> Any:
    """A module by dotted name, or a Python file by path (loaded once, under a name of its own)."""
    if not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name).resolve()
    key = f"beyondagent_agent_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, path)
        if spec is None or spec.loader is None or not path.is_file():
            raise FileNotFoundError(f"no file {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]


class AgentWorkflow:
    def __init__(self, config: AgentConfig):
        if not (config.timeout > 0 and math.isfinite(config.timeout)):
            raise ValueError(f"workflow.timeout must be a positive number of seconds, got {config.timeout}")
        if config.max_calls < 1:
            raise ValueError(f"workflow.max_calls must be >= 1, got {config.max_calls}")
        self.config = config
        self.agent = load_entrypoint(config.entrypoint)
        if not takes_api_key(self.agent):
            raise ValueError(f"workflow.entrypoint: {config.entrypoint} takes no api_key: the gateway answers only "
                             "calls with the episode's key; define run(task, llm_base_url, env, api_key) and give it "
                             "to the client (OpenAI(base_url=llm_base_url, api_key=api_key))")

    async def run(self, task: Task, env: AsyncEnv | None, llm: ChatLLM) -> Trajectory:
        if self.config.seats > 1:
            raise refuse_seats(self.config.seats)
        (trajectory,) = await self.play(task, env, [llm])
        return trajectory

    async def run_seats(self, task: Task, env: AsyncEnv | None, seat_llm: SeatLLM) -> list[Trajectory]:
        """The agent's episode, one trajectory per seat (`seats`; one: as `run`)."""
        seats = self.config.seats
        return await self.play(task, env, [seat_llm(seat, seats=seats) for seat in range(seats)])

    async def play(self, task: Task, env: AsyncEnv | None, llms: list[ChatLLM]) -> list[Trajectory]:
        """The agent run with one gateway endpoint per chat of `llms` (a seat each; one for an ordinary agent)."""
        from beyondagent_plugin_gateway.server import shared_gateway

        episodes = []
        for llm in llms:
            open_episode = getattr(llm, "gateway_episode", None)
            if open_episode is None:
                raise AgentError(f"the `agent` workflow needs a backend that serves the OpenAI-compatible gateway; "
                                 f"this LLM ({type(llm).__name__}) does not")
            episode = open_episode(max_calls=self.config.max_calls,
                                   max_concurrent_calls=self.config.max_concurrent_calls, max_n=self.config.max_n)
            episode.prompt_guard = AnswerLeakGuard(task)  # a synthetic task's reference never reaches the model
            episodes.append(episode)
        gateway = shared_gateway()
        endpoints = [gateway.open(episode, asyncio.get_running_loop()) for episode in episodes]
        urls, keys = [e.base_url for e in endpoints], [e.api_key for e in endpoints]
        seated = len(llms) > 1
        name = self.config.entrypoint
        reason = "the agent returned"
        try:
            result = await asyncio.wait_for(self._call(task, urls if seated else urls[0], keys if seated else keys[0],
                                                       env), self.config.timeout)
        except TimeoutError:
            reason = "the agent timed out"
            calls = sum(len(episode.calls) for episode in episodes)
            raise AgentError(f"agent {name} did not finish within {self.config.timeout:g} s (workflow.timeout); "
                             f"it made {calls} model call(s)") from None
        except asyncio.CancelledError:
            reason = "the episode was cancelled"
            raise
        except Exception as exc:
            reason = "the agent raised"
            for episode in episodes:
                if episode.leak is not None:
                    raise episode.leak from None
            raise AgentError(f"agent {name} raised {type(exc).__name__}: {exc}") from exc
        finally:
            for endpoint in endpoints:
                gateway.close(endpoint.episode_id, reason)
        for seat, episode in enumerate(episodes):
            if episode.leak is not None:  # the agent went on after the gateway refused the leaking prompt
                raise episode.leak
            if not episode.calls:
                where = f"the llm_base_url of seat {seat}" if seated else "the llm_base_url it is given"
                raise AgentError(f"agent {name} returned without calling the model: it must send its chat "
                                 f"completions to {where}, with the api_key it is given")
            if episode.refused_reward is not None:
                raise AgentError(f"agent {name} posted a reward the gateway refused: {episode.refused_reward}")
        rewards = await self.rewards(result, episodes, env)
        trajectories = []
        for seat, (episode, (reward, source)) in enumerate(zip(episodes, rewards)):
            metrics = {"gateway_calls": len(episode.calls), "gateway_samples": len(episode.samples),
                       "gateway_splits": episode.splits, "turns": len(episode.calls)}
            if reward is not None:
                metrics["reward_source"] = source
            trajectories.append(Trajectory(task=task, turns=episode.turns(), reward=reward, terminated=True,
                                           metrics=metrics, seat=seat if seated else None))
        return trajectories

    async def rewards(self, result: Any, episodes: list[Any], env: AsyncEnv | None
                      ) -> list[tuple[Reward | None, str]]:
        """Each seat's reward and where it came from: what the agent returned (a list, one per seat, when
        it plays several), else posted, else the env's (`evaluate()`, or `seat_rewards()` for seats)."""
        name = self.config.entrypoint
        if len(episodes) == 1:
            reward, source = as_reward(result, name), "agent"
            if reward is None and episodes[0].posted_reward is not None:
                reward, source = episodes[0].posted_reward, "agent"
            if reward is None and env is not None:
                reward, source = await env.evaluate(), "env"
            return [(reward, source)]
        if result is not None:
            if not isinstance(result, (list, tuple)) or len(result) != len(episodes):
                raise AgentError(f"agent {name} plays {len(episodes)} seats (workflow.seats) and returned "
                                 f"{type(result).__name__}; return a list of {len(episodes)} rewards, or None (then "
                                 "the env's seat_rewards() scores the seats)")
            return [(as_reward(value, name), "agent") for value in result]
        if env is None:
            return [(None, "agent")] * len(episodes)
        return [(reward, "env") for reward in await seat_rewards(env, len(episodes))]

    async def _call(self, task: Task, base_url: str, api_key: str, env: AsyncEnv | None) -> Any:
        loop = asyncio.get_running_loop()
        if inspect.iscoroutinefunction(self.agent):
            # on an event loop of its own, in its own thread: the rollout's loop runs the policy's
            # decode steps synchronously, and an agent's HTTP client sharing it would see its timers
            # (openai's connect timeout) fire during a long step; its env calls go to the rollout's loop
            proxy = None if env is None else ForwardedEnv(env, loop)
            return await run_in_thread(lambda: asyncio.run(self.agent(task, base_url, proxy, api_key=api_key)))
        sync_env = None if env is None else SyncEnv(env, loop)
        result = await run_in_thread(lambda: self.agent(task, base_url, sync_env, api_key=api_key))
        return await result if inspect.isawaitable(result) else result


def takes_api_key(function: Any) -> bool:
    """Whether `function` can be called with `api_key=` (a parameter of that name, or **kwargs)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): let the call say
        return True
    return any(p.kind is p.VAR_KEYWORD or (p.name == "api_key" and p.kind is not p.POSITIONAL_ONLY)
               for p in parameters)


def as_reward(value: Any, name: str) -> Reward | None:
    """What `run` returned as a Reward (None: no reward of its own); an AgentError naming the
    agent for anything that is not a finite score within +-REWARD_LIMIT."""
    if value is None:
        return None
    if isinstance(value, Reward):
        score, success, reason = value.score, value.success, value.reason
    elif isinstance(value, dict) and "score" in value:
        score, success, reason = value["score"], value.get("success"), value.get("reason", "returned by the agent")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        score, success, reason = value, None, "returned by the agent"
    else:
        raise AgentError(f"agent {name} returned {type(value).__name__}; return a number, a Reward, "
                         "{'score': ...} or None (then the env or the judge scores the episode)")
    try:
        score = reward_score(score)
    except ValueError as exc:
        raise AgentError(f"agent {name} returned a reward the run cannot train on: {exc} (rewards are finite "
                         f"numbers within +-{REWARD_LIMIT:g}; return None to let the env or the judge score)") from None
    if isinstance(value, Reward):
        return attrs.evolve(value, score=score)
    # as a posted reward is read (server.reward_from): a "false" string must not count as a success
    if success is not None and not isinstance(success, bool):
        raise AgentError(f"agent {name} returned a reward whose success is {success!r} "
                         f"({type(success).__name__}); success is true or false (or left out: score > 0)")
    if not isinstance(reason, str):
        raise AgentError(f"agent {name} returned a reward whose reason is {type(reason).__name__}, not text")
    return Reward(score, success=score > 0 if success is None else success, reason=reason[:MAX_REASON_CHARS])


async def run_in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """Run `function(*args)` in a daemon thread of its own: a hung agent cannot hold the event loop
    or the interpreter's exit (asyncio's default executor would wait for it)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future = loop.create_future()

    def settle(setter: Callable[[Any], None], value: Any) -> None:
        if not future.done():
            setter(value)

    def hand_over(setter: Callable[[Any], None], value: Any) -> None:
        try:
            loop.call_soon_threadsafe(settle, setter, value)
        except RuntimeError:  # the rollout's loop is closed: the episode ended (timed out) long ago
            pass

    def target() -> None:
        try:
            value = function(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting episode
            hand_over(future.set_exception, exc)
        else:
            hand_over(future.set_result, value)

    threading.Thread(target=target, name=f"agent-{getattr(function, '__name__', 'run')}", daemon=True).start()
    return await future


class ForwardedEnv:
    """The episode's async env for an async agent on an event loop of its own: each call runs on
    the rollout's loop (where the env lives) and is awaited from the agent's."""

    def __init__(self, env: AsyncEnv, loop: asyncio.AbstractEventLoop):
        self._env, self._loop = env, loop

    async def _forward(self, awaitable: Any) -> Any:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(awaitable, self._loop))

    async def reset(self, task: Task) -> Any:
        return await self._forward(self._env.reset(task))

    async def step(self, action: dict[str, Any]) -> Any:
        return await self._forward(self._env.step(action))

    async def evaluate(self) -> Reward:
        return await self._forward(self._env.evaluate())

    async def call(self, method: str, *args: Any) -> Any:
        return await self._forward(self._env.call(method, *args))


class SyncEnv:
    """The episode's async env for an agent running in a thread: the same methods, called synchronously."""

    def __init__(self, env: AsyncEnv, loop: asyncio.AbstractEventLoop):
        self._env, self._loop = env, loop

    def _wait(self, awaitable: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(awaitable, self._loop).result()

    def reset(self, task: Task) -> Any:
        return self._wait(self._env.reset(task))

    def step(self, action: dict[str, Any]) -> Any:
        return self._wait(self._env.step(action))

    def evaluate(self) -> Reward:
        return self._wait(self._env.evaluate())

    def call(self, method: str, *args: Any) -> Any:
        return self._wait(self._env.call(method, *args))
