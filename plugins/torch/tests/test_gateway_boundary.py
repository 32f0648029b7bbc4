"""The gateway as a boundary: what another local process, or one episode's agent, can do through it.

Real servers on loopback, the real `openai` client and raw sockets:
- a second local process without the episode's key can do nothing to it: generate, append calls,
  post or overwrite its reward, list models, or make the server fail; a key opens its own
  episode only; the episode's own agent is served as before;
- episode ids and keys reach no log event;
- a posted reward is a finite number within +-1e6 (400 otherwise, and the workflow fails the
  episode naming the agent: test_agent_workflow.py);
- per-episode limits: calls in flight (429), `n` (400), one token budget over all calls and choices;
- a prompt longer than the episode's tokens can spell is refused before it is tokenized, and
  tokenizing runs in a worker thread, off the rollout's event loop;
- the env service's guards: a deadline on request headers, a connection cap;
- JSON nested to any depth is a 400 on /chat/completions and /reward, never a 500.

The policy is the tiny model where replies may be anything; where a test needs replies of a known
length or a call held open, `Scripted` stands in for it (it answers `max_tokens` tokens).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
import pytest
from gateway_helpers import LoopThread, auth, client, policy_endpoint, tiny_chat
from structlog.testing import capture_logs
from tiny_and_real import loaded_tokenizer

from beyondagent_plugin_gateway.episode import GatewayEpisode, GenerationSettings
from beyondagent_plugin_gateway.server import Endpoint, Gateway
from beyondagent_core.runtime.tokens import ChatTemplate

HI = [{"role": "user", "content": "hi"}]


class Scripted:
    """The generator's interface, answering `settings.max_tokens` tokens of "a" (no end-of-turn),
    once `release()` was called when `hold()` was."""

    def __init__(self, tokenizer: Any):
        self.eos_token_ids = frozenset({tokenizer.convert_tokens_to_ids("<|im_end|>")})
        self.token = tokenizer.encode("a", add_special_tokens=False)[0]
        self.asked: list[GenerationSettings] = []
        self.failure: Exception | None = None
        self._gate: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def hold(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self._gate = loop, asyncio.Event()

    def release(self) -> None:
        assert self._loop is not None and self._gate is not None
        self._loop.call_soon_threadsafe(self._gate.set)

    async def generate(self, prompt_ids: list[int], settings: GenerationSettings, session: Any):
        self.asked.append(settings)
        if self._gate is not None:
            await self._gate.wait()
        if self.failure is not None:
            raise self.failure
        return [self.token] * settings.max_tokens, [-0.1] * settings.max_tokens

    def end_session(self, session: Any) -> None:
        pass


@contextlib.contextmanager
def scripted_endpoint(*, max_episode_tokens: int = 1024, max_tokens: int = 4,
                      **limits: int) -> Iterator[tuple[GatewayEpisode, Endpoint, Scripted, LoopThread]]:
    """(the episode, its endpoint, its generator, the rollout's loop) on a gateway of its own."""
    tokenizer = loaded_tokenizer("tiny")
    generator = Scripted(tokenizer)
    loop, gateway = LoopThread(), Gateway()
    episode = GatewayEpisode(ChatTemplate(tokenizer), generator, GenerationSettings(1.0, 1.0, max_tokens),
                             max_episode_tokens=max_episode_tokens, **limits)
    endpoint = gateway.open(episode, loop.loop)
    try:
        yield episode, endpoint, generator, loop
    finally:
        gateway.close(endpoint.episode_id)
        gateway.stop()
        loop.stop()


# --- authentication ----------------------------------------------------------------------------

INTRUDER = r'''
import json, sys, httpx

base, other_key = sys.argv[1], sys.argv[2]  # the episode's URL (ids are no secret), another episode's key
root = base.removesuffix("/v1")
chat = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
attempts = [("POST", base + "/chat/completions", chat),                       # generate, append a call
            ("POST", root + "/reward", '{"score": 1.0, "success": true}'),    # overwrite the reward
            ("POST", root + "/reward", '{"score": NaN}'),                     # stop the run at its next step
            ("POST", base + "/chat/completions", "[" * 100000 + "]" * 100000),
            ("POST", root + "/reward", '{"score": ' + "[" * 100000),
            ("GET", base + "/models", None)]
keys = [None, "Bearer unused", "Bearer " + other_key, other_key, "Basic " + other_key]
statuses = []
for key in keys:
    for method, url, body in attempts:
        headers = {"Content-Type": "application/json", **({"Authorization": key} if key else {})}
        statuses.append(httpx.request(method, url, content=body, headers=headers, timeout=60).status_code)
print(json.dumps(statuses))
'''


def test_a_process_without_the_episode_s_key_can_do_nothing_to_it() -> None:
    other_loop = LoopThread()
    with policy_endpoint() as (episode, endpoint, gateway):
        other = gateway.open(tiny_chat().gateway_episode(), other_loop.loop)  # its key opens its own episode only
        ran = subprocess.run([sys.executable, "-c", INTRUDER, endpoint.base_url, other.api_key],
                             capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        statuses = json.loads(ran.stdout)
        assert statuses == [401] * 30
        assert not episode.calls and episode.posted_reward is None and episode.refused_reward is None
        assert gateway.refused[401] == 30 and not gateway.refused.keys() - {401}
        # ...and the episode's own agent, with its key, is served as before
        reply = client(endpoint).chat.completions.create(model="m", messages=HI, max_tokens=2)
        assert reply.choices and len(episode.calls) == 1
        gateway.close(other.episode_id)
    other_loop.stop()
    assert endpoint.api_key not in repr(endpoint)  # a key printed with its endpoint stays hidden


def test_episode_ids_and_keys_reach_no_log_event() -> None:
    with capture_logs() as events, scripted_endpoint() as (_, endpoint, generator, _loop):
        generator.failure = RuntimeError("the scheduler broke")
        with pytest.raises(openai.InternalServerError, match="the scheduler broke"):
            client(endpoint).chat.completions.create(model="m", messages=HI)
    failed = [event for event in events if event["event"] == "gateway.call_failed"]
    assert failed and failed[0]["episode"] == endpoint.episode_id[:8] + "…"
    logged = repr(events)
    assert endpoint.episode_id not in logged and endpoint.api_key not in logged


# --- rewards -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "error"), [
    (b'{"score": NaN}', "got nan"),
    (b'{"score": Infinity, "success": true}', "got inf"),
    (b'{"score": -Infinity}', "got -inf"),
    (b'{"score": 1e308}', "got 1e+308"),
    (b"1e308", "got 1e+308"),
    (b'{"score": 100000000000000000000000000000000}', "got an integer of 107 bits"),
    (b'{"score": "1"}', "must be a number, got str"),
    (b'{"score": true}', "must be a number, got bool"),
])
def test_a_posted_reward_must_be_a_finite_number_within_1e6(body: bytes, error: str) -> None:
    with scripted_endpoint() as (episode, endpoint, _, _loop):
        reward_url = endpoint.base_url.removesuffix("/v1") + "/reward"
        reply = httpx.post(reward_url, content=body, headers=auth(endpoint), timeout=30)
        assert reply.status_code == 400, reply.text
        assert error in reply.json()["error"]["message"]
        assert episode.posted_reward is None and error in episode.refused_reward  # the workflow fails the episode
        assert httpx.post(reward_url, json={"score": -1e6}, headers=auth(endpoint), timeout=30).status_code == 200
        assert episode.posted_reward.score == -1e6


# --- limits ------------------------------------------------------------------------------------

def test_calls_in_flight_past_the_episode_s_limit_get_429() -> None:
    with scripted_endpoint(max_concurrent_calls=2) as (episode, endpoint, generator, loop):
        generator.hold(loop.loop)
        llm = client(endpoint, timeout=10)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            held = [pool.submit(llm.chat.completions.create, model="m", messages=HI) for _ in range(2)]
            while len(generator.asked) < 2:
                threading.Event().wait(0.01)
            with pytest.raises(openai.RateLimitError, match=r"2 model calls in flight.*workflow.max_concurrent_calls"):
                llm.chat.completions.create(model="m", messages=HI)
            generator.release()
            assert all(future.result(30).choices for future in held)
        assert llm.chat.completions.create(model="m", messages=HI).choices  # one finished: room again
    assert len(episode.calls) == 3


def test_an_episode_closed_while_a_call_generates_records_nothing_of_it() -> None:
    """The workflow ends the episode (its agent timed out) while a call is being answered: the call
    gets a 410 when its tokens come back, and nothing of it reaches the episode's samples."""
    with scripted_endpoint() as (episode, endpoint, generator, loop):
        generator.hold(loop.loop)
        llm = client(endpoint, timeout=30)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            held = pool.submit(llm.chat.completions.create, model="m", messages=HI)
            while not generator.asked:
                threading.Event().wait(0.01)
            episode.close()  # what `Gateway.close` does to the episode
            generator.release()
            with pytest.raises(openai.APIStatusError) as caught:
                held.result(30)
        assert caught.value.status_code == 410 and "ended while this call was being answered" in str(caught.value)
    assert episode.calls == [] and episode.samples == []


def test_n_past_the_episode_s_limit_is_a_400() -> None:
    with scripted_endpoint(max_n=2) as (episode, endpoint, generator, _loop):
        with pytest.raises(openai.BadRequestError, match=r"n=3: .* at most 2 choices \(workflow.max_n\)"):
            client(endpoint).chat.completions.create(model="m", messages=HI, n=3)
        assert not generator.asked and not episode.calls


def test_max_tokens_is_cut_to_the_episode_s_token_budget_over_all_calls_and_choices() -> None:
    """`n=16` with a huge `max_tokens` used to sample up to the sample's room for each choice (130 s
    while the step's other episodes timed out); the episode now samples its budget at most."""
    with scripted_endpoint(max_episode_tokens=64) as (_, endpoint, generator, _loop):
        llm = client(endpoint)
        reply = llm.chat.completions.create(model="m", messages=HI, n=4, max_tokens=100_000)
        assert [settings.max_tokens for settings in generator.asked] == [16] * 4  # 64 tokens shared by 4 choices
        assert reply.usage.completion_tokens == 64
        with pytest.raises(openai.BadRequestError, match="sampled its budget of 64 tokens") as spent:
            llm.chat.completions.create(model="m", messages=HI, max_tokens=1)
        assert spent.value.code == "context_length_exceeded"


@contextlib.contextmanager
def recording_encode(episode: GatewayEpisode) -> Iterator[list[tuple[int, threading.Thread]]]:
    """(characters, thread) of every text the episode's template tokenizes."""
    seen: list[tuple[int, threading.Thread]] = []
    encode = episode.template.encode

    def recorded(text: str) -> list[int]:
        seen.append((len(text), threading.current_thread()))
        return encode(text)

    episode.template.encode = recorded
    yield seen


def test_a_prompt_too_long_for_the_budget_is_refused_before_it_is_tokenized() -> None:
    with scripted_endpoint(max_episode_tokens=1024) as (episode, endpoint, generator, _loop), \
            recording_encode(episode) as seen:
        huge = [{"role": "user", "content": "hello world " * 200_000}]  # 2.4 MB
        with pytest.raises(openai.BadRequestError, match=r"the prompt is \d+ bytes") as refused:
            client(endpoint).chat.completions.create(model="m", messages=huge)
        assert refused.value.code == "context_length_exceeded"
        assert not seen and not generator.asked
        assert episode.max_prompt_bytes < 2_400_000


def test_prompts_are_tokenized_off_the_rollout_s_event_loop() -> None:
    with scripted_endpoint() as (episode, endpoint, _, loop), recording_encode(episode) as seen:
        client(endpoint).chat.completions.create(model="m", messages=HI)
        assert seen and all(thread is not loop.thread for _, thread in seen)


# --- the server --------------------------------------------------------------------------------

def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname, parts.port


def closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_half_sent_headers_are_closed_while_healthz_answers() -> None:
    gateway = Gateway(header_timeout=1.0)
    gateway.start()
    try:
        slow = []
        for _ in range(30):
            sock = socket.create_connection(address(gateway.url))
            sock.sendall(b"POST /0123/v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # never ends
            slow.append(sock)
        assert httpx.get(f"{gateway.url}/healthz", timeout=5).json()["ok"]
        assert all(closed_within(sock, 15) for sock in slow)
        for sock in slow:
            sock.close()
    finally:
        gateway.stop()


def test_past_the_connection_cap_requests_get_503() -> None:
    gateway = Gateway(max_connections=4, header_timeout=30.0)
    gateway.start()
    try:
        idle = [socket.create_connection(address(gateway.url)) for _ in range(4)]
        threading.Event().wait(0.2)
        assert httpx.get(f"{gateway.url}/healthz", timeout=10).status_code == 503
        for sock in idle:
            sock.close()
    finally:
        gateway.stop()


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def test_json_nested_to_any_depth_is_a_400() -> None:
    """Past the parser's depth anywhere, past 64 levels where the gateway walks it (tools, tool-call
    arguments as objects or as JSON text), and on /reward: a 400, never a 500."""
    def call(arguments: str) -> str:
        return ('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, '
                '"tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": '
                + arguments + "}}]}]}")

    def tools(depth: int) -> str:
        return ('{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": '
                '{"name": "f", "parameters": ' + nested(depth) + "}}]}")

    with scripted_endpoint() as (episode, endpoint, _, _loop):
        chat_url = f"{endpoint.base_url}/chat/completions"
        reward_url = endpoint.base_url.removesuffix("/v1") + "/reward"
        bodies = [(chat_url, nested(depth)) for depth in (10, 900, 5_000, 200_000)]
        bodies += [(chat_url, call('{"a": ' + nested(depth) + "}")) for depth in (64, 900, 5_000)]
        bodies += [(chat_url, call(json.dumps(json.dumps({"a": json.loads(nested(depth))})))) for depth in (64, 900)]
        bodies += [(chat_url, call(json.dumps('{"a": ' + nested(depth) + "}"))) for depth in (5_000, 200_000)]
        bodies += [(chat_url, tools(depth)) for depth in (70, 900, 5_000)]
        bodies += [(reward_url, '{"score": ' + nested(depth) + "}") for depth in (900, 200_000)]
        bodies += [(reward_url, '{"score": 1, "reason": ' + nested(depth) + "}") for depth in (900, 200_000)]
        for url, body in bodies:
            reply = httpx.post(url, content=body, headers={**auth(endpoint), "Content-Type": "application/json"},
                               timeout=30)
            assert reply.status_code == 400, (url, len(body), reply.status_code, reply.text[:200])
            assert reply.json()["error"]["message"]
        assert not episode.calls and episode.posted_reward is None
