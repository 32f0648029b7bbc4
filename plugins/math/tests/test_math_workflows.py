"""`math_cot` and `math_tool` with `env=None`: turns, tool observations, the loss mask, tool failures.

The policy is `ScriptedPolicy` (math_scripted_llm.py), standing in for a model that writes code
on cue; the tokenizer, the chat template, the sandbox and the judge are real.
"""

from __future__ import annotations

import asyncio

import pytest
from beyondagent_plugin_math.config import MathAnswerConfig, MathCotConfig, MathToolConfig, SandboxConfig
from beyondagent_plugin_math.cot import MathCotWorkflow
from beyondagent_plugin_math.judges import MathAnswerJudge
from beyondagent_plugin_math.sandbox import isolation_unavailable
from beyondagent_plugin_math.tool_workflow import BUDGET_SPENT, MathToolWorkflow, find_code
from math_scripted_llm import ScriptedPolicy

from beyondagent_core.runtime.tokens import ChatTemplate, episode_tokens
from beyondagent_core.types import Task

load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer  # the tiny tokenizer

TASK = Task(task_id="q1", query="What is 6 * 7?", ground_truth="42")
# Isolated where this machine allows it; elsewhere (a container without user namespaces) the
# guarded subprocess, so the workflow's behaviour is still tested (the sandbox's own tests say which).
FAST_SANDBOX = SandboxConfig(timeout=2.0, cpu_seconds=2, max_output_chars=200, max_file_mb=1,
                             unsafe_local=isolation_unavailable() is not None)


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


def run(workflow, task, llm):
    return asyncio.run(workflow.run(task, None, llm))


@pytest.mark.parametrize(("reply", "code"), [
    ("Let me compute.\n```python\nprint(6*7)\n```", "print(6*7)"),
    ("```py\nx = 2\n```\nand\n```python\nprint(x)\n```", "x = 2\n\nprint(x)"),
    ("<python>print(1)</python>", "print(1)"),
    ("```python\nprint(3)", "print(3)"),  # left open: a stop string cut the closing fence
    ("```python\nprint(6*7)\n```\nSo the answer is \\boxed{42}.", None),  # answered after the code
    ("The answer is \\boxed{42}.", None),
    ("```\nnot python\n```", None),
    ("```python\n\n```", None),
    ("", None),
])
def test_find_code(reply: str, code: str | None) -> None:
    assert find_code(reply) == code


def test_cot_is_one_turn_with_the_system_prompt_and_the_question() -> None:
    llm = ScriptedPolicy(["6 * 7 = 42, so \\boxed{42}."])
    trajectory = run(MathCotWorkflow(MathCotConfig(temperature=0.5)), TASK, llm)
    assert [t.role for t in trajectory.turns] == ["system", "user", "assistant"]
    assert "\\boxed{}" in trajectory.turns[0].content and trajectory.turns[1].content == TASK.query
    assert llm.calls[0]["sampling"] == {"temperature": 0.5}
    assert trajectory.reward is None and trajectory.terminated
    assert asyncio.run(MathAnswerJudge().score(TASK, trajectory)).score == 1.0


def test_cot_uses_a_verl_rows_own_prompt() -> None:
    prompt = [{"role": "user", "content": "What is 1+1? Output the final answer after ####."}]
    task = Task(task_id="gsm8k-0", query=prompt[0]["content"], ground_truth="2", metadata={"prompt": prompt})
    llm = ScriptedPolicy(["#### 2"])
    trajectory = run(MathCotWorkflow(), task, llm)
    assert llm.calls[0]["messages"] == prompt
    assert asyncio.run(MathAnswerJudge().score(task, trajectory)).success


def test_a_task_without_a_query_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'empty' has no query"):
        run(MathCotWorkflow(), Task(task_id="empty"), ScriptedPolicy(["x"]))


def test_a_tool_episode_masks_the_tool_output_out_of_the_loss(tokenizer) -> None:
    replies = ["I will compute it.\n```python\nprint(6 * 7)\n```", "The tool says 42, so \\boxed{42}."]
    llm = ScriptedPolicy(replies, tokenizer)
    workflow = MathToolWorkflow(MathToolConfig(sandbox=FAST_SANDBOX))
    trajectory = run(workflow, TASK, llm)

    assert [t.role for t in trajectory.turns] == ["system", "user", "assistant", "user", "assistant"]
    assert trajectory.turns[3].content == "```output\n42\n```"
    assert trajectory.metrics["tool_calls"] == 1 and trajectory.metrics["answered"] and trajectory.terminated
    assert asyncio.run(MathAnswerJudge().score(TASK, trajectory)).success

    sequence = llm.sequence
    # The live sequence is the replay of the saved turns: training sees what the model saw.
    replay = episode_tokens(trajectory.turns, ChatTemplate(tokenizer))
    assert (replay.input_ids, replay.loss_mask) == (sequence.input_ids, sequence.loss_mask)
    # Mask 1 exactly on the model's sampled ids, in order; everything else 0.
    model_ids = [i for turn in trajectory.turns if turn.token_ids for i in turn.token_ids]
    assert [i for i, m in zip(sequence.input_ids, sequence.loss_mask) if m] == model_ids
    assert sum(sequence.loss_mask) == len(model_ids)
    # The tool's output sits in a mask-0 span between the two model turns.
    spans = _spans(sequence.loss_mask)
    assert [value for value, _, _ in spans] == [0, 1, 0, 1]
    _, start, end = spans[2]
    between = tokenizer.decode(sequence.input_ids[start:end])
    assert "```output\n42\n```" in between and between.count("<|im_start|>") == 2  # tool message + next turn
    assert "<|im_start|>user" in between
    # And the whole sequence reads as the chat template renders the conversation.
    rendered = tokenizer.apply_chat_template(
        [{"role": t.role, "content": t.content} for t in trajectory.turns], tokenize=False)
    assert tokenizer.decode(sequence.input_ids) == rendered.rstrip("\n")


def _spans(mask: list[int]) -> list[tuple[int, int, int]]:
    spans, start = [], 0
    for index in range(1, len(mask) + 1):
        if index == len(mask) or mask[index] != mask[start]:
            spans.append((mask[start], start, index))
            start = index
    return spans


@pytest.mark.parametrize(("code", "expected"), [
    ("raise RuntimeError('boom')", "RuntimeError: boom"),
    ("while True:\n    pass", "ran out of time"),
    ("while True:\n    print('z' * 10000)", "output truncated"),
    ("import os\nos.fork()", "does not allow os.fork"),
    ("import socket\nsocket.socket()", "does not allow socket"),
])
def test_tool_code_that_crashes_hangs_or_floods_becomes_an_observation(tokenizer, code: str, expected: str) -> None:
    replies = [f"```python\n{code}\n```", "\\boxed{42}"]
    llm = ScriptedPolicy(replies, tokenizer)
    trajectory = run(MathToolWorkflow(MathToolConfig(sandbox=FAST_SANDBOX)), TASK, llm)
    observation = trajectory.turns[3].content
    assert expected in observation and len(observation) < 1000
    assert trajectory.metrics["tool_errors"] == 1 and trajectory.metrics["answered"]
    assert trajectory.turns[-1].content == "\\boxed{42}"


def test_the_tool_budget_and_the_turn_limit(tokenizer) -> None:
    code = "```python\nprint(1)\n```"
    llm = ScriptedPolicy([code, code, code, "\\boxed{1}"], tokenizer)
    config = MathToolConfig(max_turns=4, max_tool_calls=1, sandbox=FAST_SANDBOX)
    trajectory = run(MathToolWorkflow(config), TASK, llm)
    observations = [t.content for t in trajectory.turns if t.role == "user"][1:]
    assert observations == ["```output\n1\n```", BUDGET_SPENT, BUDGET_SPENT]
    assert trajectory.metrics["tool_calls"] == 1 and trajectory.metrics["turns"] == 4

    # Out of turns while still calling the tool: the last code is not run, the episode is not answered.
    llm = ScriptedPolicy([code, code], tokenizer)
    trajectory = run(MathToolWorkflow(MathToolConfig(max_turns=2, sandbox=FAST_SANDBOX)), TASK, llm)
    assert trajectory.turns[-1].role == "assistant" and trajectory.metrics["tool_calls"] == 1
    assert not trajectory.terminated and not trajectory.metrics["answered"]


def test_running_out_of_context_ends_the_episode(tokenizer) -> None:
    llm = ScriptedPolicy(["```python\nprint(1)\n```"], tokenizer)  # the next chat() raises ContextLengthExceeded
    trajectory = run(MathToolWorkflow(MathToolConfig(sandbox=FAST_SANDBOX)), TASK, llm)
    assert trajectory.metrics["truncated"] and not trajectory.terminated
    reward = asyncio.run(MathAnswerJudge().score(TASK, trajectory))
    assert (reward.score, reward.details["status"]) == (0.0, "truncated") and "token budget" in reward.reason
    graded = asyncio.run(MathAnswerJudge(MathAnswerConfig(truncated_score=None)).score(TASK, trajectory))
    assert graded.details["status"] == "no_answer"


def test_stop_strings_and_sampling_reach_the_llm() -> None:
    llm = ScriptedPolicy(["\\boxed{42}"])
    config = MathToolConfig(stop=["```output"], temperature=0.7, max_tokens=64, sandbox=FAST_SANDBOX)
    run(MathToolWorkflow(config), TASK, llm)
    assert llm.calls[0]["sampling"] == {"temperature": 0.7, "max_tokens": 64, "stop": ["```output"]}
