"""verl's token budgets at their exact limits (eighth audit, mutants E07 and E09).

- `backend.max_new_tokens` may equal `backend.max_response_tokens` (one turn filling the whole
  response); one more is refused;
- an `agent` episode's gateway sample whose first prompt is exactly verl's `rollout.prompt_length`
  tokens is trained as it is (`gateway_sample`); one token less of budget makes it an episode error
  that names backend.max_prompt_tokens, with no reward.

`FixedServer` stands in for verl's server manager (as in test_verl_chat_finish_reason.py); the
calls go through the real gateway episode with the tiny model's template. From the eighth audit.
"""

from __future__ import annotations

import asyncio

import pytest
from beyondagent_plugin_gateway.api import parse_request
from beyondagent_plugin_verl.config import VerlConfig
from beyondagent_plugin_verl.verl_chat import VerlChat, gateway_sample
from test_verl_chat_finish_reason import FixedServer

from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.types import Reward, Task, Trajectory

load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer


def test_a_turn_may_fill_the_whole_response_budget_and_no_more() -> None:
    assert VerlConfig(max_new_tokens=256, max_response_tokens=256).max_new_tokens == 256
    with pytest.raises(ValueError, match="cannot exceed max_response_tokens"):
        VerlConfig(max_new_tokens=257, max_response_tokens=256)


def agent_episode(prompt_length: int) -> tuple[VerlChat, Trajectory]:
    """One gateway call of an `agent` episode, on a chat with verl's prompt budget `prompt_length`."""
    template = ChatTemplate(load_tokenizer("tiny"))
    reply = [*template.tokenizer.encode("move left", add_special_tokens=False), template.turn_suffix_ids[0]]
    chat = VerlChat(FixedServer(reply), template, {}, request_id="r", prompt_length=prompt_length,
                    response_length=64, max_new_tokens=16)
    gateway = chat.gateway_episode()
    asyncio.run(gateway.complete(parse_request({"messages": [{"role": "user", "content": "Where to? Say a move."}]})))
    return chat, Trajectory(task=Task(task_id="t"), reward=Reward(score=1.0, success=True))


def test_a_gateway_prompt_of_exactly_the_prompt_budget_is_trained() -> None:
    probe, _ = agent_episode(4096)
    length = probe.gateway.samples[0].prompt_length
    assert 4 < length < 4096
    chat, trajectory = agent_episode(length)
    sequence, kept = gateway_sample(chat, trajectory)
    assert kept is trajectory and kept.error is None
    assert sequence is chat.gateway.samples[0] and sequence.prompt_length == length

    chat, trajectory = agent_episode(length - 1)
    sequence, failed = gateway_sample(chat, trajectory)
    assert len(sequence) == 0 and failed.reward is None
    assert failed.error.startswith("PromptTooLong") and f"prompt is {length} tokens" in failed.error
    assert f"rollout.prompt_length={length - 1}" in failed.error
