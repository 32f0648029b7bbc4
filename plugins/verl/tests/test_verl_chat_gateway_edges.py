"""`verl_chat.py` at its edges, for the gateway's `agent` episodes and the weights versions (main venv).

- a gateway call asks verl's server for the request's own temperature and top_p over the rollout's
  other sampling settings, at most the backend's `max_new_tokens` (a request may ask for fewer),
  log-probs on, the chat's stop ids; a server that returns no log-probs gives NaN ones;
- the gateway's defaults are the rollout's temperature and top_p, its token budget the prompt's
  plus the response's, made once per episode; closing without a gateway is fine;
- weights versions read verl's `global_steps` when the min/max pair is absent, and fall back to
  the step given when the server reported none;
- `gateway_sample`: an episode that already failed or made no call trains nothing and stays as it
  was; one whose calls split into samples becomes a GatewaySplit error without a reward.

`Recording` (test_verl_metric_and_request_names.py) and `FixedServer` (test_verl_chat_finish_reason.py)
stand in for verl's server manager, as there; the template is the tiny model's.
"""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace
from typing import Any

import pytest
from beyondagent_plugin_gateway.api import parse_request
from beyondagent_plugin_gateway.episode import GenerationSettings
from beyondagent_plugin_verl.verl_chat import VerlChat, VerlGenerator, gateway_sample
from test_verl_chat_finish_reason import FixedServer
from test_verl_metric_and_request_names import Recording

from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.types import Reward, Task, Trajectory

load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer


@pytest.fixture(scope="module")
def template() -> ChatTemplate:
    return ChatTemplate(load_tokenizer("tiny"))


class Answering:
    """Stands in for verl's server manager: records each call's sampling settings, answers `output`."""

    def __init__(self, **output: Any):
        self.output, self.params = output, []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict) -> SimpleNamespace:
        self.params.append(sampling_params)
        return SimpleNamespace(**{"token_ids": [5, 6], "log_probs": None, "stop_reason": "completed", **self.output})


def chat_on(server: Any, template: ChatTemplate, **sampling: Any) -> VerlChat:
    return VerlChat(server, template, sampling, request_id="r", prompt_length=100, response_length=60,
                    max_new_tokens=4)


@pytest.mark.parametrize(("asked", "sent"), [(8, 4), (4, 4), (3, 3)])
def test_a_gateway_call_samples_as_the_request_asks_within_the_backends_turn_limit(
        template: ChatTemplate, asked: int, sent: int) -> None:
    server = Answering()
    chat = chat_on(server, template, temperature=1.0, top_p=1.0, repetition_penalty=1.1)
    ids, logprobs = asyncio.run(VerlGenerator(chat).generate([1, 2], GenerationSettings(0.3, 0.8, asked), "s"))
    params = server.params[0]
    assert (params["temperature"], params["top_p"], params["max_tokens"]) == (0.3, 0.8, sent)
    assert params["repetition_penalty"] == 1.1 and params["logprobs"] is True
    assert params["stop_token_ids"] == chat.stop_token_ids
    assert ids == [5, 6] and len(logprobs) == 2 and all(math.isnan(x) for x in logprobs)


def test_the_gateways_defaults_are_the_rollouts_and_its_budget_the_whole_sequence(template: ChatTemplate) -> None:
    chat = chat_on(Recording(), template, temperature=0.7, top_p=0.9)
    chat.close()  # no gateway yet: nothing to close
    gateway = chat.gateway_episode()
    assert chat.gateway_episode() is gateway  # one per episode
    assert (gateway.defaults.temperature, gateway.defaults.top_p, gateway.defaults.max_tokens) == (0.7, 0.9, 4)
    assert gateway.max_episode_tokens == 160
    chat.close()


def test_weights_versions_read_verls_global_steps_and_fall_back_without_any(template: ChatTemplate) -> None:
    chat = chat_on(Answering(extra_fields={"global_steps": 3}), template)
    assert chat.weight_versions(9) == (9, 9)  # nothing generated yet
    asyncio.run(chat.generate("r", [1], {}))
    chat.server_manager = Answering(extra_fields={"min_global_steps": 4, "max_global_steps": 5})
    asyncio.run(chat.generate("r", [1], {}))
    chat.server_manager = Answering()  # a server that reports no version
    asyncio.run(chat.generate("r", [1], {}))
    assert chat.weight_versions(9) == (3, 5)
    assert [g["min_global_steps"] for g in chat.generations] == [3, 4, None]


def trajectory(**fields: Any) -> Trajectory:
    return Trajectory(task=Task(task_id="t"), reward=Reward(score=1.0, success=True), **fields)


def test_an_episode_that_failed_or_made_no_call_trains_nothing_and_stays_as_it_was(template: ChatTemplate) -> None:
    reply = [*template.tokenizer.encode("move left", add_special_tokens=False), template.turn_suffix_ids[0]]
    chat = chat_on(FixedServer(reply), template)
    silent = trajectory()
    sequence, same = gateway_sample(chat, silent)
    assert len(sequence) == 0 and same is silent  # no gateway at all
    gateway = chat.gateway_episode()
    assert gateway_sample(chat, silent)[1] is silent  # a gateway, but no call
    asyncio.run(gateway.complete(parse_request({"messages": [{"role": "user", "content": "Where to?"}]})))
    assert len(gateway.samples) == 1
    failed = trajectory(error="TimeoutError: the agent took too long")  # after its one call
    sequence, same = gateway_sample(chat, failed)
    assert len(sequence) == 0 and same is failed and same.reward is not None
    chat.close()


def test_calls_split_into_samples_are_an_episode_error_without_a_reward(template: ChatTemplate) -> None:
    reply = [*template.tokenizer.encode("move left", add_special_tokens=False), template.turn_suffix_ids[0]]
    chat = chat_on(FixedServer(reply), template)
    gateway = chat.gateway_episode()

    async def calls() -> None:  # the second call does not extend the first prompt and reply: a new sample
        await gateway.complete(parse_request({"messages": [{"role": "user", "content": "Where to?"}]}))
        await gateway.complete(parse_request({"messages": [{"role": "user", "content": "Start again."}]}))

    asyncio.run(calls())
    assert len(gateway.samples) == 2
    sequence, failed = gateway_sample(chat, trajectory())
    assert len(sequence) == 0 and failed.reward is None
    assert failed.error.startswith("GatewaySplit: the agent's 2 model calls became 2 samples")
    chat.close()
