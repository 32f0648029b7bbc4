"""The AgentScope example agent trained through the gateway on the tiny policy: no mocks of AgentScope.

Rollouts run the real thing: AgentScope's `Agent` and `OpenAIChatModel` (its `openai` client on
loopback), the gateway, the torch backend's ChatScheduler on the tiny model, gymnasium's
FrozenLake. What training sees is checked against what the scheduler sampled, as
plugins/torch/tests/test_agent_workflow.py does for a plain `openai` loop (its `trained_turns`):
every sampled turn is trained once, each conditioned on the prompt it was sampled with, and no
episode splits. The tiny model never writes a tool call, so one test answers some calls with a
scripted `<tool_call>` (and an empty reply) through the same code path, streamed or not: AgentScope
sends the call back, runs the tool, and the episode is still one sample. The example spec trains
two steps and reports `gateway/split_episodes`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_gym.config import FrozenLakeConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.rollout import rollout
from beyondagent_plugin_torch.trainer import stop_token_ids
from test_agent_workflow import trained_turns
from tiny_and_real import loaded_policy

from beyondagent_plugin_gateway.agent import AgentConfig, AgentWorkflow
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.types import Task

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "agentscope_frozenlake.yaml"
AGENT = "beyondagent_plugin_agentscope.frozenlake:run"
TASKS = [Task(task_id=f"frozenlake/train/{i}", env="frozenlake", metadata={"size": 2}) for i in range(2)]
MOVE = '<tool_call>\n{{"name": "move", "arguments": {{"direction": "{}"}}}}\n</tool_call>'


def roll_out(entrypoint: str, *, group: int = 2, script: Callable[[str], str | None] | None = None
             ) -> tuple[list[Any], list[tuple[list[int], list[int]]]]:
    """Every task `group` times with the agent; returns the episodes and what was sampled, (prompt
    ids, reply ids) per call. As test_agent_workflow.run_agents, with room for the tools prompt
    (1024 tokens); `script(prompt text)` may give a call's reply text instead of sampling it."""
    model, tiny = loaded_policy("tiny")
    template = ChatTemplate(tiny)
    scheduler = ChatScheduler(model, eos_token_ids=stop_token_ids(model, tiny, template),
                              pad_token_id=tiny.pad_token_id)
    end = tiny.convert_tokens_to_ids("<|im_end|>")
    sampled: list[tuple[list[int], list[int]]] = []
    generate = scheduler.generate

    async def recording(order, prompt_ids, *args, **kwargs):
        text = script(tiny.decode(prompt_ids, skip_special_tokens=False)) if script else None
        if text is None:
            ids, logprobs = await generate(order, prompt_ids, *args, **kwargs)
        else:
            ids = tiny.encode(text, add_special_tokens=False) + [end]
            logprobs = [-0.1] * len(ids)
        sampled.append((list(prompt_ids), list(ids)))
        return ids, logprobs

    scheduler.generate = recording
    workflow = AgentWorkflow(AgentConfig(entrypoint=entrypoint, timeout=120))
    runner = EpisodeRunner(workflow, make_env=lambda: FrozenLake(FrozenLakeConfig(size=2, max_steps=4)))
    jobs = [(g, task) for g, task in enumerate(TASKS) for _ in range(group)]
    episodes = asyncio.run(rollout(jobs, runner=runner, scheduler=scheduler, template=template,
                                   sampling=Sampling(1.0, 1.0, 3), max_episode_tokens=1024, max_concurrency=4,
                                   seed=(0,)))
    return episodes, sampled


def assert_trained_as_sampled(episodes: list[Any], sampled: list[tuple[list[int], list[int]]]) -> None:
    assert all(e.trajectory.error is None for e in episodes), [e.trajectory.error for e in episodes]
    # Every sampled turn is trained, once: the batch's model turns are the scheduler's replies...
    assert sorted(trained_turns(episodes)) == sorted(tuple(ids) for _, ids in sampled)
    # ...each conditioned on the prompt it was sampled with.
    calls = {(tuple(prompt), tuple(ids)) for prompt, ids in sampled}
    for episode in episodes:
        for sample in episode.samples:
            for start, end in sample.turn_spans:
                assert (tuple(sample.input_ids[:start]), tuple(sample.input_ids[start:end])) in calls
        # AgentScope only ever appends to the conversation: one sample per episode.
        assert episode.trajectory.metrics["gateway_splits"] == 0 and len(episode.samples) == 1
    assert sum(e.trajectory.metrics["gateway_calls"] for e in episodes) == len(sampled)


def test_the_agentscope_agent_trains_ids_equal_to_the_sampled_ones() -> None:
    episodes, sampled = roll_out(AGENT)
    assert_trained_as_sampled(episodes, sampled)
    assert all(e.trajectory.metrics["reward_source"] == "env" for e in episodes)
    # the text answers were played: every episode took a step (4 at most, FrozenLake's max_steps here)
    assert all(1 <= e.trajectory.metrics["gateway_calls"] <= 4 for e in episodes)


STREAMING = '''
from beyondagent_plugin_agentscope import frozenlake

async def run(task, llm_base_url, env, api_key):
    return await frozenlake.run(task, llm_base_url, env, api_key, stream=True)
'''


def scripted_moves(prompt: str) -> str | None:
    """A model that first answers an empty reply, then calls `move` right and down, then samples."""
    history = prompt.split("<|im_start|>user", 1)[1]  # the tools prompt shows a <tool_call> example
    if "<|im_start|>assistant\n<|im_end|>" not in history:
        return ""
    moves = history.count("<tool_call>")
    return MOVE.format(("right", "down")[moves]) if moves < 2 else None


@pytest.mark.parametrize("stream", [False, True])
def test_tool_calls_and_empty_replies_go_round_trip_without_a_split(tmp_path: Path, stream: bool) -> None:
    entrypoint = AGENT
    if stream:
        (tmp_path / "streaming_agent.py").write_text(STREAMING, encoding="utf-8")
        entrypoint = f"{tmp_path / 'streaming_agent.py'}:run"
    episodes, sampled = roll_out(entrypoint, group=1, script=scripted_moves)
    assert_trained_as_sampled(episodes, sampled)
    _, tiny = loaded_policy("tiny")
    texts = [tiny.decode(prompt + ids, skip_special_tokens=False) for prompt, ids in sampled]
    # AgentScope ran the tool: the env's board came back as the tool's message, and the game went on
    # (or ended in a hole or at the goal, and the reply stopped without another model call).
    assert any("<|im_start|>tool\n" in text and "You are at row 0, column 1." in text for text in texts)
    for episode in episodes:
        last = episode.trajectory.turns[-1]
        assert episode.trajectory.reward.details["steps"] >= 1
        assert not any("system-reminder" in (turn.content or "") for turn in episode.trajectory.turns)
        assert last.role == "assistant"


@pytest.mark.beyondagent_plugins("agentscope", "gym", "torch", "mixers")
def test_the_example_spec_trains_two_steps(run_spec, tmp_path: Path) -> None:
    result = run_spec(EXAMPLE, "backend.total_steps=2", "backend.batch_size=2", "algorithm.group_size=2",
                      "backend.eval_every=0", "tasks.val.count=2", f"run.output_dir={tmp_path}")
    assert result.metrics["steps"] == 2
    lines = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if line.get("step", 0) >= 1 and "train/reward_mean" in line]
    assert len(steps) == 2
    for line in steps:
        assert line["train/episode_errors"] == 0
        assert line["gateway/calls_per_episode"] >= 1
        assert line["gateway/split_episodes"] == 0.0  # reported, and 0: AgentScope's history only grows
        assert line["gateway/samples_per_episode"] == 1.0
        assert line["rollout/logprob_diff"] < 1e-3  # trained on the ids it sampled, with their log-probs
