"""The `agent` workflow: a plain `openai` SDK agent loop trained on FrozenLake 2x2 through the gateway.

Rollouts here run the real thing (the tiny policy's scheduler, the gateway on loopback, the
openai client, gymnasium's FrozenLake) and check the tokens against what the scheduler sampled:
every sampled turn is trained once, in the sample it was sampled for. A chat template that drops
earlier reasoning (its generation prompt opens `<think>`, its history does not show it) splits
every call into a sample of its own, with the episode weighed once. An agent that raises, hangs
or never calls the model ends its episode with the cause.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from beyondagent_plugin_gym.config import FrozenLakeConfig
from beyondagent_plugin_gym.frozenlake import FrozenLake
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.rollout import rollout
from beyondagent_plugin_torch.trainer import samples_token_view, stop_token_ids
from beyondagent_plugin_torch.update import make_batch
from tiny_and_real import loaded_policy

from beyondagent_core.advantages import failure_of
from beyondagent_core.episode_records import expand_tokens
from beyondagent_plugin_gateway.agent import AgentConfig, AgentWorkflow
from beyondagent_core.runtime.episodes import EpisodeRunner
from beyondagent_core.runtime.tokens import ChatTemplate
from beyondagent_core.types import Task

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "agent_openai.yaml"
AGENT = ROOT / "examples" / "agents" / "openai_frozenlake.py"
TASKS = [Task(task_id=f"frozenlake/train/{i}", env="frozenlake", metadata={"size": 2}) for i in range(2)]


def agents_module(tmp_path: Path, source: str) -> str:
    path = tmp_path / "agents_under_test.py"
    path.write_text(source, encoding="utf-8")
    return str(path)


def run_agents(entrypoint: str, *, tokenizer: Any = None, timeout: float = 60, group: int = 2,
               tasks: list[Task] = TASKS, **options: Any) -> tuple[list[Any], list[tuple[list[int], list[int]]]]:
    """Roll out every task `group` times with the agent; returns the episodes and what the scheduler
    sampled: (prompt ids, sampled ids) of every request."""
    model, tiny = loaded_policy("tiny")
    template = ChatTemplate(tokenizer or tiny)
    scheduler = ChatScheduler(model, eos_token_ids=stop_token_ids(model, template.tokenizer, template),
                              pad_token_id=tiny.pad_token_id)
    sampled: list[tuple[list[int], list[int]]] = []
    generate = scheduler.generate

    async def recording(order, prompt_ids, *args, **kwargs):
        ids, logprobs = await generate(order, prompt_ids, *args, **kwargs)
        sampled.append((list(prompt_ids), list(ids)))
        return ids, logprobs

    scheduler.generate = recording
    workflow = AgentWorkflow(AgentConfig(entrypoint=entrypoint, timeout=timeout, **options))
    runner = EpisodeRunner(workflow, make_env=lambda: FrozenLake(FrozenLakeConfig(size=2, max_steps=4)))
    jobs = [(g, task) for g, task in enumerate(tasks) for _ in range(group)]
    episodes = asyncio.run(rollout(jobs, runner=runner, scheduler=scheduler, template=template,
                                   sampling=Sampling(1.0, 1.0, 3), max_episode_tokens=512, max_concurrency=4,
                                   seed=(0,)))
    return episodes, sampled


def trained_turns(episodes: list[Any]) -> list[tuple[int, ...]]:
    """The model turns training sees: loss-masked ids of every row of the batch, turn by turn."""
    batch = make_batch(episodes, [1.0] * len(episodes), pad_token_id=0, device="cpu")
    turns = []
    for row in range(batch.size):
        current: list[int] = []
        for t in range(batch.loss_mask.shape[1]):
            if batch.loss_mask[row, t]:
                current.append(int(batch.input_ids[row, t + 1]))
            elif current:
                turns.append(tuple(current))
                current = []
        if current:
            turns.append(tuple(current))
    return turns


def test_an_openai_sdk_agent_trains_ids_equal_to_the_sampled_ones() -> None:
    episodes, sampled = run_agents(f"{AGENT}:run")
    assert all(e.trajectory.error is None for e in episodes), [e.trajectory.error for e in episodes]
    assert all(e.trajectory.metrics["reward_source"] == "env" for e in episodes)
    # Every sampled turn is trained, once: the batch's model turns are the scheduler's replies.
    assert sorted(trained_turns(episodes)) == sorted(tuple(ids) for _, ids in sampled)
    # ...each conditioned on the prompt it was sampled with: a sample's tokens before a turn are that prompt.
    prompts = {tuple(ids): tuple(prompt) for prompt, ids in sampled}
    for episode in episodes:
        for sample in episode.samples:
            for start, end in sample.turn_spans:
                assert prompts[tuple(sample.input_ids[start:end])] == tuple(sample.input_ids[:start])
    calls = sum(e.trajectory.metrics["gateway_calls"] for e in episodes)
    assert calls == len(sampled) and calls >= len(episodes)


THINKING_TEMPLATE = (  # DeepSeek-R1 / Qwen3 style: the reply opens in <think>, history drops the reasoning
    "{%- for message in messages %}"
    "{%- set content = message['content'] %}"
    "{%- if message['role'] == 'assistant' %}{%- set content = content.split('</think>')[-1] %}{%- endif %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}"
)


def test_a_template_that_drops_reasoning_splits_every_call_into_its_own_sample() -> None:
    _, tiny = loaded_policy("tiny")
    thinking = copy.deepcopy(tiny)
    thinking.chat_template = THINKING_TEMPLATE
    episodes, sampled = run_agents(f"{AGENT}:run", tokenizer=thinking)
    assert all(e.trajectory.error is None for e in episodes), [e.trajectory.error for e in episodes]
    for episode in episodes:
        calls = episode.trajectory.metrics["gateway_calls"]
        assert len(episode.samples) == calls and episode.trajectory.metrics["gateway_splits"] == calls - 1
        for sample in episode.samples:  # each sample: the whole prompt of its call, then that call's reply
            assert len(sample.turn_spans) == 1 and sample.prompt_length == sample.turn_spans[0][0]
    assert sorted(trained_turns(episodes)) == sorted(tuple(ids) for _, ids in sampled)
    batch = make_batch(episodes, [1.0] * len(episodes), pad_token_id=0, device="cpu")
    shares = [1 / len(e.samples) for e in episodes for _ in e.samples]
    assert batch.episode_share.tolist() == pytest.approx(shares)
    assert float(batch.episode_share.sum()) == pytest.approx(len(episodes))  # each episode counts once
    # The episode's record (episodes.jsonl, for the viewer) holds every sample, end to end, with where
    # each starts, and the advantages the estimator gave the samples laid out that way.
    episode = max(episodes, key=lambda e: len(e.samples))
    length = sum(len(sample) for sample in episode.samples)
    advantages = [0.5 * (i % 3) for i in range(length)]
    block = samples_token_view(episode.samples, advantages, lambda ids: [f"<{i}>" for i in ids])
    rows = expand_tokens({"tokens": block})
    assert [row["id"] for row in rows] == [t for sample in episode.samples for t in sample.input_ids]
    assert [row["mask"] for row in rows] == [b for sample in episode.samples for b in sample.loss_mask]
    assert [row["advantage"] for row in rows] == advantages
    starts = [0]
    for sample in episode.samples[:-1]:
        starts.append(starts[-1] + len(sample))
    assert block["sample_starts"] == starts and len(starts) > 1


FAILING_AGENTS = '''
import time
from openai import OpenAI

async def on_a_loop_of_its_own(task, llm_base_url, env, api_key):
    import asyncio, threading
    from openai import AsyncOpenAI
    await env.reset(task)  # the env lives on the rollout's loop; the call is forwarded there
    await AsyncOpenAI(base_url=llm_base_url, api_key=api_key).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    return {"score": 0.5 if threading.current_thread() is not threading.main_thread() else -1.0,
            "success": True}

def ask(llm_base_url, api_key):
    OpenAI(base_url=llm_base_url, api_key=api_key).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2)

def raises(task, llm_base_url, env, api_key):
    ask(llm_base_url, api_key)
    raise KeyError("the map has no goal")

def hangs(task, llm_base_url, env, api_key):
    time.sleep(30)

async def never_calls(task, llm_base_url, env, api_key):
    return 1.0

def returns_reward(task, llm_base_url, env, api_key):
    ask(llm_base_url, api_key)
    return {"score": 0.25, "success": False}

def posts_reward(task, llm_base_url, env, api_key):
    import httpx
    ask(llm_base_url, api_key)
    httpx.post(llm_base_url.removesuffix("/v1") + "/reward", json={"score": 0.75, "success": True},
               headers={"Authorization": f"Bearer {api_key}"}).raise_for_status()

def returns_nan(task, llm_base_url, env, api_key):
    ask(llm_base_url, api_key)
    return float("nan")

def returns_huge(task, llm_base_url, env, api_key):
    ask(llm_base_url, api_key)
    return {"score": 1e308, "success": True}

def posts_nan(task, llm_base_url, env, api_key):
    import httpx
    ask(llm_base_url, api_key)
    httpx.post(llm_base_url.removesuffix("/v1") + "/reward", content=b'{"score": NaN}',  # Python's json writes NaN
               headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"})

def sends_no_key(task, llm_base_url, env, api_key):
    ask(llm_base_url, "unused")

def asks_three_choices(task, llm_base_url, env, api_key):
    OpenAI(base_url=llm_base_url, api_key=api_key, max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=2, n=3)
    return 1.0

def keeps_its_url_then_raises(task, llm_base_url, env, api_key):
    import json, os
    ask(llm_base_url, api_key)
    with open(os.environ["AGENT_URL_FILE"], "a") as handle:
        handle.write(json.dumps([llm_base_url, api_key]) + "\\n")
    raise RuntimeError("the agent broke")

def sends_the_query(task, llm_base_url, env, api_key):
    OpenAI(base_url=llm_base_url, api_key=api_key).chat.completions.create(
        model="m", messages=[{"role": "user", "content": task.query}], max_tokens=2)
    return 1.0

def swallows_the_refusal(task, llm_base_url, env, api_key):
    try:
        sends_the_query(task, llm_base_url, env, api_key)
    except Exception:
        ask(llm_base_url, api_key)
    return 1.0

def takes_no_key(task, llm_base_url, env):
    ask(llm_base_url, "unused")

def takes_keywords(task, llm_base_url, env, **options):
    ask(llm_base_url, options["api_key"])
    return 1.0
'''


@pytest.mark.parametrize(("function", "timeout", "error"), [
    ("raises", 60, "raised KeyError: 'the map has no goal'"),
    ("hangs", 1, "did not finish within 1 s (workflow.timeout); it made 0 model call(s)"),
    ("never_calls", 60, "returned without calling the model"),
    ("sends_no_key", 60, "raised AuthenticationError"),
    # a reward the run cannot train on is the agent's error, never the advantage estimator's
    ("returns_nan", 60, "returned a reward the run cannot train on: a reward score must be a finite number "
                        "from -1e+06 to 1e+06, got nan"),
    ("returns_huge", 60, "returned a reward the run cannot train on: a reward score must be a finite number "
                         "from -1e+06 to 1e+06, got 1e+308"),
    ("posts_nan", 60, "posted a reward the gateway refused: a reward score must be a finite number from -1e+06 "
                      "to 1e+06, got nan (the reward posted to /reward)"),
])
def test_a_failing_agent_is_an_episode_error_with_its_cause(tmp_path: Path, function: str, timeout: float,
                                                            error: str) -> None:
    episodes, _ = run_agents(f"{agents_module(tmp_path, FAILING_AGENTS)}:{function}", timeout=timeout, group=1)
    expected = f"AgentError: agent {tmp_path}/agents_under_test.py:{function} {error}"
    errors = [e.trajectory.error or "" for e in episodes]
    assert len(errors) == 2 and all(e.startswith(expected) for e in errors), errors  # the cause, in full
    assert not any(e.trainable for e in episodes)
    assert not any("http://" in (e.trajectory.error or "") for e in episodes)  # no episode URL (its id) in errors
    # why each leaves its group's statistics (advantage/dropped_<reason>)
    reason = "timeout" if function == "hangs" else "error"
    assert [failure_of(e.trajectory, trainable=e.trainable) for e in episodes] == [reason] * len(episodes)


def test_the_workflows_max_n_reaches_each_episodes_gateway(tmp_path: Path) -> None:
    entrypoint = f"{agents_module(tmp_path, FAILING_AGENTS)}:asks_three_choices"
    episodes, _ = run_agents(entrypoint, group=1, max_n=2)
    assert all("BadRequestError" in (e.trajectory.error or "") and "at most 2 choices (workflow.max_n)"
               in (e.trajectory.error or "") for e in episodes), [e.trajectory.error for e in episodes]
    episodes, _ = run_agents(entrypoint, group=1)  # the default (4) lets three through
    assert all(e.trajectory.error is None for e in episodes), [e.trajectory.error for e in episodes]


def test_an_episode_whose_agent_raised_is_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    urls = tmp_path / "urls.jsonl"
    monkeypatch.setenv("AGENT_URL_FILE", str(urls))
    episodes, _ = run_agents(f"{agents_module(tmp_path, FAILING_AGENTS)}:keeps_its_url_then_raises", group=1)
    assert all("the agent broke" in (e.trajectory.error or "") for e in episodes)
    for line in urls.read_text().splitlines():
        base_url, key = json.loads(line)
        with pytest.raises(openai.APIStatusError) as caught:  # its URL takes no more calls
            openai.OpenAI(base_url=base_url, api_key=key, max_retries=0).chat.completions.create(
                model="m", messages=[{"role": "user", "content": "again"}], max_tokens=2)
        assert caught.value.status_code == 410


@pytest.mark.parametrize("function", ["sends_the_query", "swallows_the_refusal"])
def test_a_synthetic_tasks_reference_in_an_agents_prompt_is_refused_and_not_trained(tmp_path: Path,
                                                                                     function: str) -> None:
    reference = "right, right, down, down"  # what an exploration did: the synthetic task's ground truth
    leaky = Task(task_id="synthetic/leaky", env="frozenlake", metadata={"size": 2}, origin="synthetic",
                 query=f"Reach the goal. Reference solution: {reference}.", ground_truth=reference,
                 seed_task_id="frozenlake/train/0")
    honest = Task(task_id="synthetic/honest", env="frozenlake", metadata={"size": 2}, origin="synthetic",
                  query="Reach the goal in four moves.", ground_truth=reference, seed_task_id="frozenlake/train/0")
    episodes, sampled = run_agents(f"{agents_module(tmp_path, FAILING_AGENTS)}:{function}", group=1,
                                   tasks=[leaky, honest])
    leaked, clean = episodes
    assert (leaked.trajectory.error or "").startswith("AnswerLeak: the prompt of synthetic task synthetic/leaky")
    assert failure_of(leaked.trajectory, trainable=leaked.trainable) == "error" and not leaked.trainable
    assert clean.trajectory.error is None and clean.trainable
    tokenizer = loaded_policy("tiny")[1]
    assert not any("right, right, down" in tokenizer.decode(prompt) for prompt, _ in sampled)  # never sampled on


@pytest.mark.parametrize(("function", "score", "success"), [("returns_reward", 0.25, False),
                                                            ("posts_reward", 0.75, True),
                                                            ("takes_keywords", 1.0, True),
                                                            # not on the rollout's thread and loop
                                                            ("on_a_loop_of_its_own", 0.5, True)])
def test_the_agent_s_own_reward_wins(tmp_path: Path, function: str, score: float, success: bool) -> None:
    episodes, _ = run_agents(f"{agents_module(tmp_path, FAILING_AGENTS)}:{function}", group=1)
    for episode in episodes:
        assert episode.trajectory.error is None
        assert (episode.trajectory.reward.score, episode.trajectory.reward.success) == (score, success)
        assert episode.trajectory.metrics["reward_source"] == "agent"


def test_a_bad_entrypoint_is_a_spec_error_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="workflow.entrypoint: cannot import 'no_such_module_here'"):
        AgentWorkflow(AgentConfig(entrypoint="no_such_module_here:run"))
    with pytest.raises(ValueError, match="has no 'nope'"):
        AgentWorkflow(AgentConfig(entrypoint=f"{agents_module(tmp_path, FAILING_AGENTS)}:nope"))
    with pytest.raises(ValueError, match="must be 'package.module:function'"):
        AgentWorkflow(AgentConfig(entrypoint="just_a_name"))
    with pytest.raises(ValueError, match=r"takes no api_key: .* define run\(task, llm_base_url, env, api_key\)"):
        AgentWorkflow(AgentConfig(entrypoint=f"{agents_module(tmp_path, FAILING_AGENTS)}:takes_no_key"))


@pytest.mark.beyondagent_plugins("gym", "torch", "mixers")
def test_the_example_spec_trains_two_steps(run_spec, tmp_path: Path) -> None:
    result = run_spec(EXAMPLE, "backend.total_steps=2", "backend.batch_size=2", "algorithm.group_size=2",
                      "backend.eval_every=0", "tasks.val.count=2", f"workflow.entrypoint={AGENT}:run",
                      f"run.output_dir={tmp_path}")
    assert result.metrics["steps"] == 2
    lines = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if line.get("step", 0) >= 1 and "train/reward_mean" in line]
    assert len(steps) == 2
    for line in steps:
        assert line["train/episode_errors"] == 0
        assert line["gateway/calls_per_episode"] >= 1
        assert line["gateway/split_episodes"] == 0.0  # the tiny template is append-only: no split
        assert line["rollout/logprob_diff"] < 1e-3  # trained on the ids it sampled, with their log-probs


DUEL_AGENT = '''
from openai import OpenAI


def run(task, llm_base_url, env, api_key):
    """Both seats of the word duel, each with its own client (endpoint and key): a two-agent program."""
    clients = [OpenAI(base_url=url, api_key=key, max_retries=0) for url, key in zip(llm_base_url, api_key)]
    reset = env.reset(task)
    seat, seen = reset.info["seat"], {0: list(reset.messages), 1: []}
    while True:
        reply = clients[seat].chat.completions.create(model="policy", messages=seen[seat], max_tokens=3)
        text = reply.choices[0].message.content or ""
        seen[seat].append({"role": "assistant", "content": text})
        step = env.step({"role": "assistant", "content": text})
        if step.terminated:
            return None  # the env's seat_rewards() score the seats
        seat = step.info["seat"]
        seen[seat] += step.observation
'''


def test_an_agent_plays_both_seats_each_through_its_own_endpoint(tmp_path: Path) -> None:
    # the torch tests' word duel (torch_test_envs.py): two seats, each seat's calls its own samples and reward
    from torch_test_envs import WordDuel, WordDuelConfig

    model, tiny = loaded_policy("tiny")
    template = ChatTemplate(tiny)
    scheduler = ChatScheduler(model, eos_token_ids=stop_token_ids(model, tiny, template), pad_token_id=tiny.pad_token_id)
    workflow = AgentWorkflow(AgentConfig(entrypoint=f"{agents_module(tmp_path, DUEL_AGENT)}:run", timeout=60, seats=2))
    runner = EpisodeRunner(workflow, make_env=lambda: WordDuel(WordDuelConfig(moves=2)))
    episodes = asyncio.run(rollout([(0, Task("duel-0", query="Which way?")), (1, Task("duel-1"))], runner=runner,
                                   scheduler=scheduler, template=template, sampling=Sampling(1.0, 1.0, 3),
                                   max_episode_tokens=512, max_concurrency=2, seed=(0,)))
    assert [(e.group, e.seat) for e in episodes] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for zero, one in (episodes[:2], episodes[2:]):
        assert zero.trajectory.error is None and one.trajectory.error is None
        assert zero.score + one.score == 1.0  # one duel: its seats' rewards add up
        assert zero.trajectory.metrics["gateway_calls"] == one.trajectory.metrics["gateway_calls"] == 2
        assert zero.trainable and one.trainable and zero.sequence is not one.sequence
        assert zero.trajectory.metrics["reward_source"] == "env"
    # an ordinary run of a two-seat agent is refused with what to do
    single = asyncio.run(runner.run(Task("duel-2"), object()))  # refused before any chat is needed
    assert single.error is not None and "2 seats" in single.error
