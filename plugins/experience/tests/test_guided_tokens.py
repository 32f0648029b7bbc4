"""Guided rollouts at token level (beyondagent_core.runtime.guidance), with real tokenizers: the tiny
model's and the real model's (SmolLM2-135M-Instruct, fetched once into the user's cache).

A guided episode's policy sees the experience in the task message on every turn (the token sequence
accepts it: no earlier message ever changes); the trajectory the workflow records has none of it;
`stripped_sequence` equals, id for id, the sequence of the same conversation never shown the
experience — and keeps the model's sampled ids and log-probs exactly. A prefix-started episode
(`PrefixLLM`) puts the replayed turns in the policy's prompt (mask 0): only the turns it sampled
are trained, with their exact ids and log-probs, and its first step observes the state the prefix
reached, as the unprefixed episode's step there does.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from beyondagent_core.advantages import scored_episode
from beyondagent_core.experience import Experience
from beyondagent_core.runtime.guidance import (
    EXAMPLES_PREAMBLE,
    EXPERIENCE_END,
    EXPERIENCE_START,
    GuidedLLM,
    PrefixLLM,
    experience_text,
    guided_rollouts,
    prefix_length,
    prefix_rollouts,
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


def test_replayed_turns_are_the_prompt_and_only_the_policys_turns_train(template) -> None:
    policy = ScriptedPolicy(template, ["down", "done"])
    llm = PrefixLLM(policy, [{"content": "right"}])
    turns = asyncio.run(play(llm))
    assert llm.replayed == 1 and len(policy.seen) == 2  # the policy is first asked after the replayed move
    assert policy.seen[0][2] == {"role": "assistant", "content": "right"}
    sequence = policy.sequence
    assert len(sequence.turn_spans) == 2 and sequence.turn_spans[0][0] == sequence.prompt_length
    prompt = template.tokenizer.decode(sequence.input_ids[:sequence.prompt_length])
    assert "right" in prompt and "Board: .S" in prompt  # the replayed move and what it led to: context
    assert set(sequence.loss_mask[:sequence.prompt_length]) == {0}
    assert [t.token_ids is None for t in turns if t.role == "assistant"] == [True, False, False]
    trained = [sequence.input_ids[a:b] for a, b in sequence.turn_spans]
    assert trained == [t.token_ids for t in turns if t.token_ids is not None]  # sampled ids, as sampled
    assert [sequence.logprobs[a:b] for a, b in sequence.turn_spans] == [t.logprobs for t in turns if t.logprobs]
    # the estimator's steps: the policy's two turns, the first observing the state the prefix reached
    trajectory = Trajectory(task=Task(task_id="t"), turns=turns, metrics={"prefix_turns": 1})
    steps = scored_episode(0, trajectory, sequence.turn_spans, len(sequence)).steps
    assert [(s.observation, s.action) for s in steps] == [("Board: .S\n.G", "down"), ("Board: ..\n.S", "done")]


def test_which_rollouts_start_from_a_prefix_and_how_much_is_replayed() -> None:
    guided = guided_rollouts(8, "mixed", 0.25, seed=("run", 1))
    prefixed = prefix_rollouts(8, 0.5, taken=guided, seed=("run", 1))
    assert len(prefixed) == 4 and not prefixed & guided
    assert prefixed == prefix_rollouts(8, 0.5, taken=guided, seed=("run", 1))
    assert len(prefix_rollouts(4, 1.0, taken={0, 1}, seed=0)) == 2  # never more than the unguided ones
    assert prefix_rollouts(4, 0.0, taken=set(), seed=0) == set()
    assert [prefix_length(n, 0.5) for n in (1, 2, 3, 4, 10)] == [0, 1, 2, 2, 5]
    assert prefix_length(4, 1.0) == 3 and prefix_length(4, 0.01) == 1  # the policy always acts; one at least


def test_worked_examples_are_introduced_as_examples() -> None:
    examples = [Experience(text="A successful attempt (reward 1):\nAction 1: right", kind="example")]
    assert EXAMPLES_PREAMBLE in experience_text(examples)
    assert EXAMPLES_PREAMBLE not in experience_text([*examples, LESSONS[0]])  # mixed with lessons: lessons'
