"""Our Workflow's Experiences in Trinity-RFT, token by token against the torch backend's own episodes.

The torch backend trains one step of a FrozenLake spec (tiny model, one episode at a time,
`logging.episodes: all`: each episode's ids, mask and sampling log-probs in episodes.jsonl). Then
`experiences_check.py` runs, in trinity's venv, the same spec with `backend: trinity` through
trinity's own config validation, plugin loader, taskset reader and Workflow calls, generating with
the torch backend's generation seeded per episode as the torch backend seeded it (vLLM, trinity's
engine, does not install here: see that file). The same episodes must come back as Experiences
with exactly the record's tokens, an action mask that is 1 on the model's tokens only, the
recorded log-probs and the judge's reward; our ADVANTAGE_FN must give the torch backend's GiGPO
advantages (GiGPO reads each episode's steps from the Experience) and, with GRPO, what trinity's
own GRPO gives; trinity's trainer batch
(`to_data_proto`) must carry the same mask, log-probs and reward.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from beyondagent_core.episode_records import expand_tokens

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
GROUP_SIZE, BATCH_SIZE, MAX_NEW_TOKENS = 4, 2, 3


def write_specs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The torch backend's spec (GiGPO, the estimator whose steps need our records), the trinity spec
    (GRPO, through our ADVANTAGE_FN as every estimator), and the trinity spec with GiGPO."""
    data = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    data.pop("profiles", None)
    data["run"].update({"name": "parity", "output_dir": str(tmp_path / "runs")})
    data["tasks"] = {"train": {"name": "gym_tasks", "env": "frozenlake", "split": "train", "count": 8, "size": 2}}
    data["algorithm"]["group_size"] = GROUP_SIZE
    data["logging"] = {"episodes": "all"}
    torch_spec = {**data, "backend": {"name": "torch", "device": "cpu", "total_steps": 1, "batch_size": BATCH_SIZE,
                                      "max_new_tokens": MAX_NEW_TOKENS, "max_episode_tokens": 1024, "lr": 0.005,
                                      "max_concurrency": 1, "eval_every": 0, "save_every": 0, "micro_batch_size": 8,
                                      "advantage": {"name": "gigpo"}}}
    trinity_spec = {**data, "backend": {"name": "trinity", "total_steps": 1, "batch_size": BATCH_SIZE,
                                        "max_new_tokens": MAX_NEW_TOKENS, "max_prompt_tokens": 512,
                                        "max_response_tokens": 512, "lr": 0.005, "gpus_per_node": 2},
                    "plugins": {"require": ["beyondagent-plugin-gym>=0.1", "beyondagent-plugin-trinity>=0.1"]}}
    gigpo_spec = {**trinity_spec, "backend": {**trinity_spec["backend"], "advantage": {"name": "gigpo"}}}
    paths = tmp_path / "torch.yaml", tmp_path / "trinity.yaml", tmp_path / "trinity_gigpo.yaml"
    for path, spec in zip(paths, (torch_spec, trinity_spec, gigpo_spec), strict=True):
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return paths


def test_experiences_match_the_torch_backends_episodes(trinity_venv: Any, tmp_path: Path) -> None:
    torch_spec, trinity_spec, gigpo_spec = write_specs(tmp_path)
    started = time.monotonic()
    trained = trinity_venv.run(["-m", "beyondagent_core.cli", "run", str(torch_spec)], timeout=600, cwd=str(ROOT))
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-4000:]
    torch_s = time.monotonic() - started
    checked = trinity_venv.run([str(HERE / "experiences_check.py"), str(tmp_path), str(torch_spec), str(trinity_spec),
                                str(gigpo_spec)], timeout=600, cwd=str(ROOT))
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-6000:]
    print(f"torch backend step: {torch_s:.1f} s; trinity check: {checked.stdout.strip().splitlines()[-1]}")
    result = json.loads((tmp_path / "result.json").read_text())
    records = [json.loads(line) for line in (tmp_path / "runs" / "parity" / "episodes.jsonl").read_text().splitlines()]
    records = [r for r in records if r["split"] == "train" and r["step"] == 1]

    assert result["registration"]["registered"], result["registration"]
    assert result["workflow_class"] == "beyondagent_plugin_trinity.trinity_workflow.BeyondAgentWorkflow"
    assert result["mode"] == "both"
    experiences = {(e["task"], e["run"]): e for e in result["experiences"]}
    assert len(experiences) == len(records) == BATCH_SIZE * GROUP_SIZE
    multi_turn = 0
    for record in records:
        group, sample = record["group"], record["index"] % GROUP_SIZE
        assert record["index"] == group * GROUP_SIZE + sample
        exp = experiences[(group, sample)]
        assert result["tasks"][group] == record["task_id"]
        assert exp["info"]["beyondagent"]["task_id"] == record["task_id"] and record["error"] is None
        rows = expand_tokens(record)
        ids, mask = [r["id"] for r in rows], [r["mask"] for r in rows]
        prompt = exp["prompt_length"]
        assert prompt == record["tokens"]["prompt_length"] and sum(mask[:prompt]) == 0
        # the response ends on the last model token: what follows it in the record is observation (mask 0)
        tokens, response_mask = exp["tokens"], exp["action_mask"]
        assert tokens == ids[:len(tokens)], f"episode {record['index']}: the token ids differ"
        assert sum(mask[len(tokens):]) == 0
        assert response_mask == mask[prompt:len(tokens)]
        assert len(exp["logprobs"]) == len(response_mask) == len(tokens) - prompt
        trained = [lp for lp, m in zip(exp["logprobs"], response_mask, strict=True) if m]
        assert trained == pytest.approx(record["tokens"]["logprobs"], abs=6e-4)  # records keep 3 decimals
        assert all(lp == 0.0 for lp, m in zip(exp["logprobs"], response_mask, strict=True) if not m)
        assert exp["reward"] == pytest.approx(record["score"]) and exp["info"]["beyondagent"]["success"] == record["success"]
        turns = exp["info"]["beyondagent"]["model_turns"]
        assert turns == len(record["tokens"]["turn_spans"]) >= 1
        if turns > 1:
            multi_turn += 1
            assert len(response_mask) > sum(response_mask)  # observations inside the response, mask 0
        # GiGPO through our ADVANTAGE_FN (from the records our Workflow put in each Experience) gives the
        # torch backend's GiGPO advantages on the model tokens; our GRPO through it gives trinity's own GRPO
        torch_advantages = [r["advantage"] for r in rows][prompt:len(tokens)]
        assert result["our_gigpo"][f"{group}/{sample}"] == pytest.approx(
            [a if m else 0.0 for a, m in zip(torch_advantages, response_mask, strict=True)], abs=2e-4)
        assert any(torch_advantages)
        assert result["our_grpo"][f"{group}/{sample}"] == pytest.approx(result["trinity_grpo"][f"{group}/{sample}"],
                                                                         abs=1e-5)
    assert multi_turn > 0, "no episode took more than one turn: observations were not exercised"
    # the step's metrics reach the run directory through our MONITOR (trinity's TensorBoard one besides)
    assert result["monitor"]["class"] == "BeyondAgentMonitor"
    [line] = [json.loads(line) for line in result["monitor"]["lines"]]
    assert line["step"] == 1 and line["role"] == "explorer"
    assert line["metrics"]["rollout/reward/mean"] == pytest.approx(sum(result["rewards"]) / len(result["rewards"]))
    # trinity's trainer batch (verl DataProto) carries our mask, log-probs and reward
    batch = result["data_proto"]
    order = [(int(uid.split("/")[1]), None) for uid in batch["uid"]]
    assert len(order) == len(records)
    for row, exp in enumerate(result["experiences"]):
        length = len(exp["action_mask"])
        assert batch["response_mask"][row][:length] == exp["action_mask"]
        assert sum(batch["response_mask"][row][length:]) == 0
        assert batch["rollout_log_probs"][row][:length] == pytest.approx(exp["logprobs"], abs=1e-6)
        assert sum(batch["token_level_scores"][row]) == pytest.approx(exp["reward"], abs=1e-6)
