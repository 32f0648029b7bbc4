"""The gateway's server routes and the `agent` workflow's every exit, class-wide (`server.py`, `agent.py`,
`config.py`), on loopback with the real `openai` client inside the agents.

- the server: `/models`, `/healthz`, 401/404/410 and their counts, ended episodes remembered exactly
  `ENDED_REMEMBERED` deep, a body of exactly `max_body_bytes` taken and one past a 413, a body that
  does not arrive within `body_timeout` a 408, a call to an episode closed under it a 410, a posted
  reward's forms (bare number, success by sign, reason cut at exactly 1000 characters, refusals
  remembered for the workflow), streamed tool calls through the SDK, ids shortened to 8 characters;
- the workflow: its endpoint closed with the cause on every exit (returned, raised, timed out after
  its `timeout`, cancelled) so a kept URL answers 410 naming it; the reward's order (returned, posted,
  the env's, none) and the metrics; `max_calls` reaching the episode end to end; async and sync agents
  get the env forwarded to the rollout's loop; seats: one endpoint each, rewards per seat, a seat
  that never called;
- `AgentConfig`'s documented defaults and each range on its limit and one past; the registered
  workflow; the entrypoint's forms and its refusals; `takes_api_key`; `as_reward` at +-1e6.

`Scripted` (test_gateway_episode_limits_and_budget.py) stands in for the policy behind each episode.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from pathlib import Path
from typing import Any

import attrs
import httpx
import openai
import pytest
from gateway_testkit import Scripted

from beyondagent_core.envs.local import LocalAsyncEnv
from beyondagent_core.protocols import EnvReset, EnvStep
from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.types import Reward, Task
from beyondagent_plugin_gateway import beyondagent_workflows
from beyondagent_plugin_gateway.agent import AgentError, AgentWorkflow, as_reward, load_entrypoint, takes_api_key
from beyondagent_plugin_gateway.api import ApiError
from beyondagent_plugin_gateway.config import AgentConfig
from beyondagent_plugin_gateway.episode import GatewayEpisode, GenerationSettings
from beyondagent_plugin_gateway.server import (
    ENDED_REMEMBERED,
    KEY_PREFIX,
    MAX_REASON_CHARS,
    Gateway,
    reward_from,
    short_id,
)

pytest.importorskip("beyondagent_plugin_torch.models")  # the tiny tokenizer (conftest.template)

HI = [{"role": "user", "content": "hi"}]
BODY_LIMIT = 4096


class LoopThread:
    """The rollout's event loop, in a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def served() -> Any:
    """(a started gateway with a small body cap and a short body deadline, the episodes' loop)."""
    gateway, loop = Gateway(max_body_bytes=BODY_LIMIT, body_timeout=1.0), LoopThread()
    gateway.start()
    yield gateway, loop
    gateway.stop()
    loop.stop()


def open_episode(served: Any, template: ChatTemplate, *replies: list[int]) -> tuple[GatewayEpisode, Any]:
    gateway, loop = served
    episode = GatewayEpisode(template, Scripted(template.tokenizer, *replies), GenerationSettings(1.0, 1.0, 3),
                             max_episode_tokens=1024)
    return episode, gateway.open(episode, loop.loop)


def auth(endpoint: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {endpoint.api_key}"}


# --- the server ---------------------------------------------------------------------------------

def test_models_health_and_the_refusals_counted(served, template) -> None:
    gateway, _ = served
    before = dict(gateway.refused)
    episode, endpoint = open_episode(served, template)
    assert endpoint.base_url == f"{gateway.url}/{endpoint.episode_id}/v1" and endpoint.api_key.startswith(KEY_PREFIX)
    models = httpx.get(f"{endpoint.base_url}/models", headers=auth(endpoint), timeout=10)
    assert models.json() == {"object": "list", "data": [{"id": "policy", "object": "model", "owned_by": "beyondagent"}]}
    health = httpx.get(f"{gateway.url}/healthz", timeout=10).json()
    assert health["ok"] and health["episodes"] >= 1 and health["slow_clients_closed"] == 0
    no_key = httpx.get(f"{endpoint.base_url}/models", timeout=10)
    assert no_key.status_code == 401 and no_key.headers["www-authenticate"] == "Bearer"
    assert no_key.json()["error"]["code"] == "invalid_api_key"
    unknown = "f" * 32  # an id this gateway never opened, with the key it would have
    gone = httpx.get(f"{gateway.url}/{unknown}/v1/models", headers={"Authorization": f"Bearer {gateway._key(unknown)}"},
                     timeout=10)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "unknown_episode"
    assert "ffffffff…" in gone.json()["error"]["message"] and unknown not in gone.json()["error"]["message"]
    gateway.close(endpoint.episode_id, "the agent returned")
    ended = httpx.get(f"{endpoint.base_url}/models", headers=auth(endpoint), timeout=10)
    assert ended.status_code == 410 and "(the agent returned)" in ended.json()["error"]["message"]
    assert episode.closed
    counted = {status: gateway.refused[status] - before.get(status, 0) for status in (401, 404, 410)}
    assert counted == {401: 1, 404: 1, 410: 1}
    health = httpx.get(f"{gateway.url}/healthz", timeout=10).json()
    assert all(health["refused"][str(status)] == gateway.refused[status] for status in (401, 404, 410))


def test_another_gateway_s_key_for_the_same_id_opens_nothing(served) -> None:
    gateway, _ = served
    assert Gateway()._key("abc") != gateway._key("abc") and gateway._key("abc") == gateway._key("abc")
    assert gateway._key("abc") != gateway._key("abd")


def test_ended_episodes_are_remembered_exactly_ended_remembered_deep() -> None:
    gateway = Gateway()  # not started: closing needs no server
    assert ENDED_REMEMBERED == 10_000
    for index in range(ENDED_REMEMBERED):
        gateway.close(f"id{index}", f"reason {index}")
    with pytest.raises(ApiError, match=r"\(reason 0\)") as first:
        gateway._episode("id0")
    assert first.value.status == 410 and first.value.code == "episode_ended"
    gateway.close("one-more")
    with pytest.raises(ApiError) as forgotten:
        gateway._episode("id0")
    assert forgotten.value.status == 404
    with pytest.raises(ApiError, match=r"\(reason 1\)"):
        gateway._episode("id1")


def test_short_ids_keep_8_characters() -> None:
    assert short_id("12345678") == "12345678"
    assert short_id("123456789") == "12345678…"


def test_a_body_of_exactly_max_body_bytes_is_read_one_more_is_413(served, template) -> None:
    episode, endpoint = open_episode(served, template)
    url = endpoint.base_url.removesuffix("/v1") + "/reward"
    headers = {**auth(endpoint), "Content-Type": "application/json"}
    exact = b"0.5" + b" " * (BODY_LIMIT - 3)
    assert httpx.post(url, content=exact, headers=headers, timeout=10).status_code == 200
    assert episode.posted_reward.score == 0.5
    past = httpx.post(url, content=exact + b" ", headers=headers, timeout=10)
    assert past.status_code == 413 and f"larger than {BODY_LIMIT} bytes" in past.json()["error"]["message"]
    assert episode.refused_reward is None  # only a 400 is a refused reward


def test_a_reward_posted_twice_counts_its_last_post(served, template) -> None:
    """docs/agents.md: an agent may correct a posted reward; the last post is the episode's."""
    episode, endpoint = open_episode(served, template)
    url = endpoint.base_url.removesuffix("/v1") + "/reward"
    for score in (0.25, -0.5):
        assert httpx.post(url, json={"score": score}, headers=auth(endpoint), timeout=10).status_code == 200
    assert episode.posted_reward.score == -0.5 and episode.posted_reward.success is False


def test_a_body_that_does_not_arrive_in_time_is_408(served, template) -> None:
    gateway, _ = served
    _, endpoint = open_episode(served, template)
    path = f"/{endpoint.episode_id}/reward"
    # the socket's own deadline is 5 s: the gateway's default body timeout would answer only after 30 s
    with socket.create_connection((gateway.host, gateway.port), timeout=5) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {endpoint.api_key}\r\n"
                     "Content-Type: application/json\r\nContent-Length: 10\r\n\r\n0.".encode())
        answer = b""
        while b"}}" not in answer:  # the whole JSON error body
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"the request body did not arrive within 1 s" in answer


def test_posted_reward_forms() -> None:
    assert reward_from(0.5) == Reward(0.5, success=True, reason="posted by the agent")
    assert reward_from(0) == Reward(0.0, success=False, reason="posted by the agent")
    assert reward_from({"score": 0}).success is False and reward_from({"score": 1e-9}).success is True
    assert reward_from({"score": -1, "success": True, "reason": "r"}) == Reward(-1.0, success=True, reason="r")
    assert MAX_REASON_CHARS == 1000
    assert reward_from({"score": 1, "reason": "x" * 1000}).reason == "x" * 1000
    assert reward_from({"score": 1, "reason": "x" * 1001}).reason == "x" * 1000
    for body, param in [({"score": 1, "success": "yes"}, "success"), ({"score": 1, "reason": 3}, "reason"),
                        ([1], "score"), (True, "score"), ("1", "score"), ({"success": True}, "score")]:
        with pytest.raises(ApiError) as caught:
            reward_from(body)
        assert (caught.value.status, caught.value.param) == (400, param), body


def test_a_refused_reward_is_kept_for_the_workflow_and_a_later_good_one_still_lands(served, template) -> None:
    episode, endpoint = open_episode(served, template)
    url = endpoint.base_url.removesuffix("/v1") + "/reward"
    assert httpx.post(url, json={"score": 1, "success": "yes"}, headers=auth(endpoint), timeout=10).status_code == 400
    assert episode.refused_reward == "success must be true or false" and episode.posted_reward is None
    assert httpx.post(url, json={"score": 1}, headers={"Authorization": "Bearer x"}, timeout=10).status_code == 401
    assert httpx.post(url, json={"score": 1}, headers=auth(endpoint), timeout=10).status_code == 200
    assert episode.posted_reward == Reward(1.0, success=True, reason="posted by the agent")


def test_a_call_to_an_episode_closed_under_it_is_410_and_streams_carry_tool_calls(served, template) -> None:
    tokenizer = template.tokenizer
    written = '<tool_call>\n{"name": "move", "arguments": {"d": "up"}}\n</tool_call>'
    ids = tokenizer.encode("ok " + written, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    episode, endpoint = open_episode(served, template, ids)
    llm = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0, timeout=30)
    tools = [{"type": "function", "function": {"name": "move", "parameters": {"type": "object"}}}]
    chunks = list(llm.chat.completions.create(model="mine", messages=HI, tools=tools, stream=True))
    calls = [call for chunk in chunks if chunk.choices for call in chunk.choices[0].delta.tool_calls or ()]
    assert [(call.index, call.id, call.function.name, call.function.arguments) for call in calls] == [
        (0, "call_0_0", "move", '{"d": "up"}')]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok"
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]
    assert {chunk.model for chunk in chunks} == {"mine"} and chunks[-1].usage is None
    episode.close()  # the episode ended while its endpoint is still routed (the workflow closes both)
    with pytest.raises(openai.APIStatusError, match="this episode has ended") as ended:
        llm.chat.completions.create(model="m", messages=HI)
    assert ended.value.status_code == 410


# --- the workflow -------------------------------------------------------------------------------

AGENTS = '''
import threading
import httpx
from openai import AsyncOpenAI, OpenAI


def ask(task, llm_base_url, api_key, calls=1):
    task.metadata.setdefault("seen", []).append((llm_base_url, api_key))
    client = OpenAI(base_url=llm_base_url, api_key=api_key, max_retries=0, timeout=30)
    for _ in range(calls):
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


def post(llm_base_url, api_key, body):
    httpx.post(llm_base_url.removesuffix("/v1") + "/reward", json=body,
               headers={"Authorization": f"Bearer {api_key}"}, timeout=30)


def returns(task, llm_base_url, env, api_key):
    ask(task, llm_base_url, api_key)
    return task.metadata.get("returns")


def posts_and_returns(task, llm_base_url, env, api_key):
    ask(task, llm_base_url, api_key)
    post(llm_base_url, api_key, {"score": 0.75, "success": True})
    return task.metadata.get("returns")


def posts_badly(task, llm_base_url, env, api_key):
    ask(task, llm_base_url, api_key)
    post(llm_base_url, api_key, {"score": 1, "reason": 3})


def raises(task, llm_base_url, env, api_key):
    ask(task, llm_base_url, api_key)
    raise KeyError("no goal")


def waits(task, llm_base_url, env, api_key):
    ask(task, llm_base_url, api_key)
    task.metadata["called"].set()
    task.metadata["release"].wait(60)


def calls_often(task, llm_base_url, env, api_key):
    ask(task, llm_base_url, api_key, calls=task.metadata["calls"])


def uses_env_sync(task, llm_base_url, env, api_key):
    ask(task, llm_base_url, api_key)
    env.reset(task)
    step = env.step({"role": "assistant", "content": "left"})
    return {"score": step.reward, "reason": env.call("valid_actions")[0] + f" {threading.current_thread().name}"}


async def uses_env_async(task, llm_base_url, env, api_key):
    await AsyncOpenAI(base_url=llm_base_url, api_key=api_key, max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}])
    await env.reset(task)
    step = await env.step({"role": "assistant", "content": "left"})
    return Reward_like(step.reward, (await env.call("valid_actions"))[0], (await env.evaluate()).score)


def Reward_like(score, reason, evaluated):
    return {"score": score + evaluated, "reason": reason}


def returns_a_coroutine(task, llm_base_url, env, api_key):
    ask(task, llm_base_url, api_key)

    async def later():
        return 0.125
    return later()


def both_seats(task, llm_base_url, env, api_key):
    for seat, (url, key) in enumerate(zip(llm_base_url, api_key)):
        if seat != task.metadata.get("skip_seat"):
            ask(task, url, key)
    return task.metadata.get("returns")
'''


class Lake:
    """A one-step env: `left` scores 0.5; `evaluate()` says 0.25; two seats' rewards 1 and 0."""

    def __init__(self) -> None:
        self.closed = False

    def reset(self, task: Task) -> EnvReset:
        return EnvReset(messages=[{"role": "user", "content": "go"}])

    def step(self, action: dict) -> EnvStep:
        return EnvStep(observation=[], reward=0.5 if action["content"] == "left" else 0.0, terminated=True)

    def evaluate(self) -> Reward:
        return Reward(0.25, success=False, reason="the env's")

    def valid_actions(self) -> list[str]:
        return ["left", "right"]

    def seat_rewards(self) -> list[dict]:
        return [Reward(1.0, success=True).to_dict(), Reward(0.0).to_dict()]

    def close(self) -> None:
        self.closed = True


class Chat:
    """The backend's chat LLM as the workflow sees it: `gateway_episode(...)` over `Scripted`."""

    def __init__(self, template: ChatTemplate):
        self.template, self.episodes = template, []

    def gateway_episode(self, **limits: int) -> GatewayEpisode:
        episode = GatewayEpisode(self.template, Scripted(self.template.tokenizer), GenerationSettings(1.0, 1.0, 2),
                                 max_episode_tokens=256, **limits)
        self.episodes.append(episode)
        return episode


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agents") / "exit_agents.py"
    path.write_text(AGENTS)
    return path


def workflow(agents: Path, function: str, **config: Any) -> AgentWorkflow:
    return AgentWorkflow(AgentConfig(entrypoint=f"{agents}:{function}", **config))


def play(agents: Path, template: ChatTemplate, function: str, task: Task, env: Any = None, seats: int = 1,
         **config: Any) -> tuple[list[Any], list[Chat]]:
    chats = [Chat(template) for _ in range(seats)]
    trajectories = asyncio.run(workflow(agents, function, seats=seats, **config).play(task, env, chats))
    return trajectories, chats


def status_of_kept_url(task: Task) -> tuple[int, str]:
    (base_url, key), *_ = task.metadata["seen"]
    llm = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=30)
    with pytest.raises(openai.APIStatusError) as caught:
        llm.chat.completions.create(model="m", messages=HI)
    return caught.value.status_code, caught.value.message


def test_an_agent_that_returns_closes_its_endpoint_saying_so(agents, template) -> None:
    task = Task("returns-1", metadata={"returns": 0.25})
    (trajectory,), (chat,) = play(agents, template, "returns", task)
    status, message = status_of_kept_url(task)
    assert status == 410 and "(the agent returned)" in message and chat.episodes[0].closed
    assert trajectory.reward == Reward(0.25, success=True, reason="returned by the agent")
    assert trajectory.metrics == {"gateway_calls": 1, "gateway_samples": 1, "gateway_splits": 0, "turns": 1,
                                  "reward_source": "agent"}
    assert trajectory.terminated and trajectory.seat is None
    assert [turn.role for turn in trajectory.turns] == ["user", "assistant"] and trajectory.turns[1].token_ids


def test_an_agent_that_raises_closes_its_endpoint_saying_so(agents, template) -> None:
    task = Task("raises-1")
    with pytest.raises(AgentError, match=f"agent {agents}:raises raised KeyError: 'no goal'"):
        play(agents, template, "raises", task)
    status, message = status_of_kept_url(task)
    assert status == 410 and "(the agent raised)" in message


def test_an_agent_past_its_timeout_closes_its_endpoint_counting_its_calls(agents, template) -> None:
    task = Task("waits-1", metadata={"called": threading.Event(), "release": threading.Event()})
    try:
        with pytest.raises(AgentError, match=r"did not finish within 1 s \(workflow.timeout\); it made 1 model"):
            play(agents, template, "waits", task, timeout=1.0)
        status, message = status_of_kept_url(task)
        assert status == 410 and "(the agent timed out)" in message
    finally:
        task.metadata["release"].set()


def test_a_cancelled_episode_closes_its_endpoint_saying_so(agents, template) -> None:
    task = Task("waits-2", metadata={"called": threading.Event(), "release": threading.Event()})
    chat = Chat(template)

    async def cancelled() -> None:
        running = asyncio.create_task(workflow(agents, "waits").play(task, None, [chat]))
        await asyncio.to_thread(task.metadata["called"].wait, 30)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    try:
        asyncio.run(cancelled())
        status, message = status_of_kept_url(task)
        assert status == 410 and "(the episode was cancelled)" in message and chat.episodes[0].closed
    finally:
        task.metadata["release"].set()


def test_the_reward_s_order_returned_posted_env_none(agents, template) -> None:
    def env() -> LocalAsyncEnv:
        return LocalAsyncEnv(Lake())

    (returned,), _ = play(agents, template, "posts_and_returns", Task("r-1", metadata={"returns": 0.25}), env())
    assert (returned.reward.score, returned.metrics["reward_source"]) == (0.25, "agent")
    (posted,), _ = play(agents, template, "posts_and_returns", Task("r-2"), env())
    assert (posted.reward.score, posted.reward.success, posted.metrics["reward_source"]) == (0.75, True, "agent")
    (evaluated,), _ = play(agents, template, "returns", Task("r-3"), env())
    assert evaluated.reward == Reward(0.25, success=False, reason="the env's")
    assert evaluated.metrics["reward_source"] == "env"
    (none,), _ = play(agents, template, "returns", Task("r-4"))
    assert none.reward is None and "reward_source" not in none.metrics
    with pytest.raises(AgentError, match="posted a reward the gateway refused: reason must be text"):
        play(agents, template, "posts_badly", Task("r-5"), env())


def test_max_calls_reaches_the_episode_end_to_end(agents, template) -> None:
    (trajectory,), _ = play(agents, template, "calls_often", Task("c-1", metadata={"calls": 2}), max_calls=2)
    assert trajectory.metrics["gateway_calls"] == 2
    with pytest.raises(AgentError, match=r"RateLimitError.*made 2 model calls, its limit \(workflow.max_calls\)"):
        play(agents, template, "calls_often", Task("c-2", metadata={"calls": 3}), max_calls=2)


def test_agents_get_the_env_on_the_rollout_s_loop_sync_async_and_awaited(agents, template) -> None:
    (sync,), _ = play(agents, template, "uses_env_sync", Task("e-1"), LocalAsyncEnv(Lake()))
    assert sync.reward.score == 0.5 and sync.reward.reason.startswith("left agent-")  # in the agent's own thread
    (forwarded,), _ = play(agents, template, "uses_env_async", Task("e-2"), LocalAsyncEnv(Lake()))
    assert forwarded.reward.score == 0.75 and forwarded.reward.reason == "left"
    (awaited,), _ = play(agents, template, "returns_a_coroutine", Task("e-3"))
    assert awaited.reward.score == 0.125


def test_seats_each_their_endpoint_and_reward(agents, template) -> None:
    trajectories, chats = play(agents, template, "both_seats", Task("s-1", metadata={"returns": [0.5, -0.5]}), seats=2)
    assert [t.seat for t in trajectories] == [0, 1] and [t.reward.score for t in trajectories] == [0.5, -0.5]
    assert all(len(chat.episodes) == 1 and len(chat.episodes[0].calls) == 1 for chat in chats)
    seen = Task("s-2")
    trajectories, _ = play(agents, template, "both_seats", seen, LocalAsyncEnv(Lake()), seats=2)
    assert [(t.reward.score, t.metrics["reward_source"]) for t in trajectories] == [(1.0, "env"), (0.0, "env")]
    assert len({url for url, _ in seen.metadata["seen"]}) == 2 and len({key for _, key in seen.metadata["seen"]}) == 2
    trajectories, _ = play(agents, template, "both_seats", Task("s-3"), seats=2)
    assert [t.reward for t in trajectories] == [None, None]
    with pytest.raises(AgentError, match=r"plays 2 seats \(workflow.seats\) and returned list; return a list of 2"):
        play(agents, template, "both_seats", Task("s-4", metadata={"returns": [1.0]}), seats=2)
    with pytest.raises(AgentError, match="without calling the model: .* the llm_base_url of seat 1"):
        play(agents, template, "both_seats", Task("s-5", metadata={"skip_seat": 1}), seats=2)


def test_an_llm_without_the_gateway_and_a_seated_run_are_refused(agents, template) -> None:
    with pytest.raises(AgentError, match="needs a backend that serves the OpenAI-compatible gateway; this LLM "
                                         r"\(object\) does not"):
        asyncio.run(workflow(agents, "returns").play(Task("x"), None, [object()]))
    with pytest.raises(Exception, match="has 2 seats"):
        asyncio.run(workflow(agents, "returns", seats=2).run(Task("x"), None, Chat(template)))


# --- settings, entrypoints, rewards ---------------------------------------------------------------

def test_agent_config_documented_defaults_and_the_registered_workflow() -> None:
    config = AgentConfig(entrypoint="m:f")
    assert (config.timeout, config.max_calls, config.max_concurrent_calls, config.max_n, config.seats) == \
        (600.0, 100, 4, 4, 1)
    (spec,) = beyondagent_workflows()
    assert (spec.name, spec.config_cls, spec.factory) == ("agent", AgentConfig,
                                                          "beyondagent_plugin_gateway.agent:AgentWorkflow")


@pytest.mark.parametrize(("key", "good", "bad"), [
    ("timeout", [1e-3, 7 * 24 * 3600], [0, -1, 7 * 24 * 3600 + 1, float("nan"), float("inf")]),
    ("max_calls", [1, 100_000], [0, 100_001]),
    ("max_concurrent_calls", [1, 64], [0, 65]),
    ("max_n", [1, 16], [0, 17]),
    ("seats", [1, 16], [0, 17]),
])
def test_each_agent_setting_on_its_limit_and_one_past(key, good, bad) -> None:
    for value in good:
        assert getattr(AgentConfig(entrypoint="m:f", **{key: value}), key) == value
    for value in bad:
        with pytest.raises(Exception, match=key):
            AgentConfig(entrypoint="m:f", **{key: value})


def test_the_workflow_checks_timeout_and_max_calls_itself(agents) -> None:
    with attrs.validators.disabled():
        for timeout in (0.0, float("nan"), float("inf")):
            with pytest.raises(ValueError, match="workflow.timeout must be a positive number"):
                AgentWorkflow(AgentConfig(entrypoint=f"{agents}:returns", timeout=timeout))
        with pytest.raises(ValueError, match="workflow.max_calls must be >= 1, got 0"):
            AgentWorkflow(AgentConfig(entrypoint=f"{agents}:returns", max_calls=0))
        assert AgentWorkflow(AgentConfig(entrypoint=f"{agents}:returns", max_calls=1, timeout=1e-9))


def test_entrypoint_forms_and_refusals(tmp_path: Path, agents) -> None:
    assert load_entrypoint(f"{agents}:returns") is load_entrypoint(f"{agents}:returns")  # the file loaded once
    assert load_entrypoint("beyondagent_plugin_gateway.agent:AgentWorkflow.rewards") is AgentWorkflow.rewards
    assert load_entrypoint("os.path:join", where="judge.entrypoint").__name__ == "join"
    for entrypoint, said in [(":run", "must be 'package.module:function'"), ("m:", "must be 'package.module:function'"),
                             (f"{tmp_path}/absent.py:run", "does the file exist"),
                             ("no_such_module_xyz:run", "is it installed, or on PYTHONPATH?"),
                             ("os:sep", "'os:sep' is a str, not a function"),
                             ("os.path:join.nope", "module 'os.path' has no 'join.nope'")]:
        with pytest.raises(ValueError, match=f"^workflow.entrypoint.*{said.replace('(', '.').replace(')', '.')}"):
            load_entrypoint(entrypoint)
    broken = tmp_path / "broken_agent.py"
    broken.write_text("raise ImportError('half written')\n")
    with pytest.raises(ValueError, match="ImportError: half written"):
        load_entrypoint(f"{broken}:run")
    broken.write_text("def run(task, llm_base_url, env, api_key):\n    return 1\n")
    assert load_entrypoint(f"{broken}:run")(None, "", None, api_key="k") == 1  # not a half-imported module


def test_takes_api_key_forms(agents) -> None:
    def keyword_only(task, url, env, *, api_key): ...

    def positional_only(task, url, env, api_key, /): ...

    def keywords(task, url, env, **options): ...

    def without(task, url, env, key): ...

    assert takes_api_key(keyword_only) and takes_api_key(keywords) and takes_api_key(type)  # no signature to read
    assert not takes_api_key(positional_only) and not takes_api_key(without)


def test_as_reward_forms_and_limits() -> None:
    given = Reward(2.0, success=False, reason="mine", details={"k": 1})
    assert as_reward(given, "a:run") == given and isinstance(as_reward(Reward(1, True), "a:run").score, float)
    assert as_reward({"score": 1, "reason": "why"}, "a:run") == Reward(1.0, success=True, reason="why")
    assert as_reward(1_000_000, "a:run").score == 1e6 and as_reward(-1e6, "a:run").score == -1e6
    for value, said in [(1_000_001, "cannot train on"), (Reward(1e6 + 1), "cannot train on"),
                        ({"score": "1"}, "cannot train on"), (True, "returned bool"), ("1", "returned str"),
                        ({"reward": 1}, "returned dict"), ([1], "returned list")]:
        with pytest.raises(AgentError, match=f"agent a:run {'returned a reward the run ' if 'train' in said else ''}"
                                             f"{said}"):
            as_reward(value, "a:run")
    # read as a posted reward is (reward_from): success a bool, the reason text cut at MAX_REASON_CHARS
    assert as_reward({"score": 0.0, "success": True, "reason": "r" * 1001}, "a:run") == Reward(
        0.0, success=True, reason="r" * MAX_REASON_CHARS)
    for value in ({"score": 0.0, "success": "false"}, {"score": 1.0, "success": 1}):
        with pytest.raises(AgentError, match="success is true or false"):
            as_reward(value, "a:run")
    with pytest.raises(AgentError, match="reason is int, not text"):
        as_reward({"score": 1.0, "reason": 7}, "a:run")
