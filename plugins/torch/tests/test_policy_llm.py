"""`llm: policy`: the model being trained explores, through the torch backend's PolicyLLM.

A whole explore-then-train run with tiny; one call at a time with both models (tiny_and_real.py):
the prompt is the chat template's (the real one's default system prompt included), and the
reply says whether it ended on the end-of-turn token (which is the real model's pad token too)
or was cut off.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from beyondagent_plugin_torch.generation import ChatScheduler, Sampling
from beyondagent_plugin_torch.policy_llm import PolicyLLM
from beyondagent_plugin_torch.trainer import stop_token_ids
from tiny_and_real import both_models

from beyondagent_core.errors import SpecError
from beyondagent_core.jsonl import read_tasks
from beyondagent_core.runtime.tokens import ChatTemplate

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "explore_frozenlake.yaml"
SHRINK = ("tasks.train.count=3", "tasks.val.count=1", "explore.n=2", "explore.max_explore_step=3",
          "backend.total_steps=1", "algorithm.group_size=2", "backend.eval_every=0", "backend.save_every=0")


@pytest.mark.beyondagent_plugins("gym", "random_explorer", "mixers", "torch", "llm")
def test_the_policy_explores_before_training(run_spec, tmp_path) -> None:
    result = run_spec(EXAMPLE, *SHRINK, "llm=policy", "explore.mode=llm", f"run.output_dir={tmp_path}")

    events = [json.loads(line) for line in (result.run_dir / "events.jsonl").read_text().splitlines()]
    finished = next(e for e in events if e["event"] == "explore.finished")
    assert finished["failures"] == 0
    assert finished["llm"]["calls"] >= 6  # 3 seeds x 2 explorations, at least one move each
    assert finished["llm"]["completion_tokens"] > 0
    read_tasks(result.run_dir / "synthetic_tasks.jsonl")  # whatever the random policy reached, readable
    assert result.metrics["steps"] == 1


@pytest.mark.beyondagent_plugins("gym", "random_explorer", "mixers", "torch", "llm")
def test_the_policy_cannot_explore_on_ray(run_spec, tmp_path) -> None:
    with pytest.raises(SpecError, match="cannot explore on Ray actors"):
        run_spec(EXAMPLE, *SHRINK, "llm=policy", "explore.mode=llm", "explore.executor=ray",
                 f"run.output_dir={tmp_path}")


QUESTION = [{"role": "user", "content": "Reply with one word: yes or no. Is ice cold?"}]


def policy_llm(policy, max_tokens: int) -> PolicyLLM:
    model, tokenizer = policy
    template = ChatTemplate(tokenizer)
    scheduler = ChatScheduler(model, eos_token_ids=stop_token_ids(model, tokenizer, template),
                              pad_token_id=tokenizer.pad_token_id)
    return PolicyLLM(scheduler, template, Sampling(0.0, 1.0, max_tokens), max_episode_tokens=200, seed=0)


@both_models
def test_a_call_is_prompted_with_the_chat_template(policy) -> None:
    _, tokenizer = policy
    llm = policy_llm(policy, max_tokens=1)
    turn = asyncio.run(llm.chat(QUESTION))
    prompt = ChatTemplate(tokenizer).prompt_ids(QUESTION)
    assert llm.usage == {"calls": 1, "prompt_tokens": len(prompt), "completion_tokens": 1}
    assert turn.token_ids is None  # not trained on


@pytest.mark.parametrize("policy", ["smollm2"], indirect=True)
def test_the_real_model_stops_on_its_end_of_turn_token_or_is_cut_off(policy) -> None:
    answered = asyncio.run(policy_llm(policy, max_tokens=8).chat(QUESTION))
    assert (answered.content.strip(" .").lower(), answered.finish_reason) == ("no", "stop")
    cut = asyncio.run(policy_llm(policy, max_tokens=1).chat(QUESTION))
    assert (cut.content, cut.finish_reason) == ("No", "length")
