"""Guided rollouts at token level (beyondagent_core.runtime.guidance), with real tokenizers: the tiny
model's and the real model's (SmolLM2-135M-Instruct, fetched once into the user's cache).

A guided episode's policy sees the experience in the task message on every turn (the token sequence
accepts it: no earlier message ever changes); the trajectory the workflow records has none of it;
`stripped_sequence` equals, id for id, the sequence of the same conversation never shown the
experience — and keeps the model's sampled ids and log-probs exactly.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from beyondagent_core.experience import Experience
from beyondagent_core.runtime.guidance import (
    EXPERIENCE_END,
    EXPERIENCE_START,
    GuidedLLM,
    guided_rollouts,
    stripped_sequence,
    trains_stripped,
)
from beyondagent_core.runtime.tokens import ChatTemplate, TokenSequence
from beyondagent_core.types import Task, Trajectory, Turn

LESSONS = [Experience(text="Go right first, then down."), Experience(text="Avoid the hole in the middle.")]


@pytest.fixture(scope="module", params=["tiny", "smollm2"])
def template(request: pytest.FixtureRequest) -> ChatTemplate:
    tiny = pytest.importorskip("beyondagent_plugin_torch.tiny")
    from beyondagent_plugin_torch.testing import real_model_dir
    from transformers import AutoTokenizer

    directory = tiny.tiny_model_dir() if request.param == "tiny" else real_model_dir()
    return ChatTemplate(AutoTokenizer.from_pretrained(directory))


class ScriptedPolicy:
    """Stands in for the sampler only: it extends a real TokenSequence and 'samples' fixed ids."""

    def __init__(self, template: ChatTemplate, replies: list[str]):
        self.template, self.replies = template, list(replies)
        self.sequence = TokenSequence(template)
        self.seen: list[list[dict[str, Any]]] = []

    async def chat(self, messages: Any, **sampling: Any) -> Turn:
        self.seen.append([dict(m) for m in messages])
        self.sequence.extend(messages)
        text = self.replies.pop(0)
        ids = self.template.encode(text) + [self.template.tokenizer.convert_tokens_to_ids("<|im_end|>")]
        logprobs = [-0.1 * (i + 1) for i in range(len(ids))]
        self.sequence.add_generation(ids, logprobs)
        return Turn("assistant", text, token_ids=ids, logprobs=logprobs)


async def play(llm: Any) -> list[Turn]:
    """A three-turn react-like workflow: it keeps its own messages, the llm sees them each turn."""
    messages = [{"role": "system", "content": "You walk a grid."}, {"role": "user", "content": "Board: S.\n.G"}]
    turns = [Turn(m["role"], m["content"]) for m in messages]
    for observation in ("Board: .S\n.G", "Board: ..\n.S"):
        reply = await llm.chat(messages)
        turns.append(reply)
        messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": observation}]
        turns.append(Turn("user", observation))
    turns.append(await llm.chat(messages))
    return turns


def test_the_policy_sees_the_experience_every_turn_and_the_trajectory_never(template) -> None:
    policy = ScriptedPolicy(template, ["right", "down", "done"])
    turns = asyncio.run(play(GuidedLLM(policy, LESSONS)))
    for seen in policy.seen:  # the task message carries the lessons, at the same place, every turn
        assert seen[1]["content"].startswith(EXPERIENCE_START) and "Go right first" in seen[1]["content"]
        assert all(EXPERIENCE_START not in m["content"] for i, m in enumerate(seen) if i != 1)
    assert all(EXPERIENCE_START not in turn.content for turn in turns)
    text = template.tokenizer.decode(policy.sequence.input_ids)
    assert EXPERIENCE_START in text and EXPERIENCE_END in text and "Avoid the hole" in text


def test_stripping_gives_exactly_the_unguided_sequence(template) -> None:
    guided = ScriptedPolicy(template, ["right", "down", "done"])
    turns = asyncio.run(play(GuidedLLM(guided, LESSONS)))
    plain = ScriptedPolicy(template, ["right", "down", "done"])
    asyncio.run(play(plain))
    stripped = stripped_sequence(Trajectory(task=Task(task_id="t"), turns=turns), template)
    assert stripped.input_ids == plain.sequence.input_ids
    assert stripped.loss_mask == plain.sequence.loss_mask and stripped.logprobs == plain.sequence.logprobs
    assert stripped.turn_spans == plain.sequence.turn_spans and len(stripped.turn_spans) == 3
    assert len(guided.sequence.input_ids) > len(stripped.input_ids)  # the lessons' tokens are gone
    sampled = [guided.sequence.input_ids[a:b] for a, b in guided.sequence.turn_spans]
    assert sampled == [stripped.input_ids[a:b] for a, b in stripped.turn_spans]  # the model's ids, untouched


def test_which_rollouts_are_guided() -> None:
    assert guided_rollouts(8, "woexp", 0.5, seed=1) == set() and guided_rollouts(8, "all", 0.5, seed=1) == set(range(8))
    mixed = guided_rollouts(8, "mixed", 0.5, seed=("run", 3))
    assert len(mixed) == 4 and mixed == guided_rollouts(8, "mixed", 0.5, seed=("run", 3))
    assert len(guided_rollouts(5, "mixed", 0.3, seed=0)) == 2  # round(1.5) = 2
    with pytest.raises(ValueError, match="woexp, mixed or all"):
        guided_rollouts(4, "some", 0.5, seed=0)


def test_which_guided_episodes_are_stripped() -> None:
    assert trains_stripped("strip", False) and not trains_stripped("keep", True)
    assert trains_stripped("hybrid", True) and not trains_stripped("hybrid", False)
