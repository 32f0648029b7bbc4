"""verl's own trainer on this CPU machine: `backend.device: cpu` (cpu_platform.py, cpu_rollout.py).

`beyondagent run` launches verl's V1 trainer (Ray, FSDP2, the agent loop, the transfer queue,
checkpoints) with our CPU platform and transformers rollout replica, on the tiny model and
FrozenLake. Two steps, then `--resume` to a third, trained with PPO (`backend.advantage: gae`: verl's
GAE and its critic worker, as the `critic:` section maps; the other estimators run in verl's trainer
in the tests below and in test_verl_cpu_self_evolve.py, which shares this file's helpers). What is
checked is what only a real step shows:

- the critic: its value loss and values each step, its checkpoint, and the resumed run continuing it;

- the actor learned (a gradient each step: `algorithm.entropy_coeff` gives one even when every
  episode of the untrained model scores the same, so GRPO's advantages are zero);
- the rollout's log-probabilities equal the ones verl's actor recomputes (fp32 on both sides);
  at steps 2 and 3 that holds only because the new weights reached the rollout server, since the
  entropy shows the actor's weights moved;
- the weights version verl's trainer reads from each episode (our agent loop passes it on);
- checkpoints in the run dir, and `--resume` continuing from the last one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from beyondagent_core.episode_records import expand_tokens

ROOT = Path(__file__).resolve().parents[3]


def cpu_spec(tmp_path: Path) -> Path:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["tasks"]["train"].update({"count": 8})
    data["tasks"].pop("val")
    data["env"]["max_steps"] = 3
    data["workflow"]["max_turns"] = 3
    data["algorithm"].update({"group_size": 2, "entropy_coeff": 0.01})
    data["logging"] = {"episodes": "all"}
    data["backend"] = {"name": "verl", "device": "cpu", "total_steps": 2, "batch_size": 2, "lr": 0.01,
                       "max_new_tokens": 2, "max_prompt_tokens": 256, "max_response_tokens": 64,
                       "micro_batch_size": 2, "save_every": 1, "timeout_s": 900}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(*args: str) -> float:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return time.monotonic() - started


def steps(run_dir: Path) -> dict[int, dict[str, Any]]:
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {line["step"]: line for line in lines}


def test_verl_trains_on_cpu_then_resumes(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    spec = cpu_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())  # PPO: verl's GAE from its critic worker
    data["backend"]["advantage"] = {"name": "gae", "lam": 0.95}
    data["critic"] = {"lr": 1e-3}
    spec.write_text(yaml.safe_dump(data))
    run_dir = tmp_path / "runs" / "verl_frozenlake"
    first = run(str(spec))
    by_step = steps(run_dir)
    assert sorted(by_step) == [1, 2]
    for step, line in by_step.items():
        assert line["verl/training/global_step"] == step
        assert line["actor/grad_norm"] > 0  # the actor was updated
        assert line["verl/critic/vf_loss"] > 0 and line["verl/critic/lr"] == 1e-3  # and the critic, at critic.lr
        assert "verl/critic/values/mean" in line and "verl/timing_s/update_critic" in line
        assert line["verl/training/rollout_probs_diff_max"] < 1e-6, line  # our rollout's log-probs are verl's
        assert line["verl/training/off_policy/trajectory_staleness/max"] == 0
        assert line["train/response_length"] > 0 and line["train/turns"] >= 1
    assert by_step[1]["verl/actor/entropy"] != by_step[2]["verl/actor/entropy"]  # the weights moved
    checkpoints = run_dir / "checkpoints"
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert (checkpoints / "global_step_1" / "actor").is_dir() and (checkpoints / "global_step_2" / "actor").is_dir()
    assert (checkpoints / "global_step_2" / "critic").is_dir()
    records = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert sorted({r["step"] for r in records}) == [1, 2] and len(records) == 2 * 2 * 2
    record = json.loads((run_dir / "reproduce.json").read_text())  # what runs it again, the backend's part too
    assert (record["backend"], record["device"], record["precision"]) == ("verl", "cpu", {"compute": "float32",
                                                                                          "params": "float32"})

    second = run("--resume", str(spec), "backend.total_steps=3")
    by_step = steps(run_dir)
    assert sorted(by_step) == [1, 2, 3]  # steps 1 and 2 were not run again
    assert by_step[3]["actor/grad_norm"] > 0 and by_step[3]["verl/critic/vf_loss"] > 0
    assert (checkpoints / "global_step_3" / "critic").is_dir()  # the resumed critic trained on and was saved
    assert by_step[3]["verl/training/rollout_probs_diff_max"] < 1e-6  # the checkpoint's weights reached the rollout
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    print(f"\nverl on CPU: 2 steps in {first:.0f} s, resumed to step 3 in {second:.0f} s "
          f"(step time {by_step[2]['perf/step_time_s']:.1f} s after the first)")


def test_a_plain_openai_agent_trains_inside_verl_through_the_gateway(verl_venv: Any, tiny_model: str,
                                                                    tmp_path: Path) -> None:
    """examples/agent_openai.yaml's agent (a plain `openai` SDK loop, unchanged) on the verl backend:
    each agent-loop worker serves the gateway, verl's server manager generates behind it, and verl
    trains on exactly the ids the server sampled."""
    spec = cpu_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["workflow"] = yaml.safe_load((ROOT / "examples" / "agent_openai.yaml").read_text())["workflow"]
    data["backend"].update({"total_steps": 1, "save_every": 0})
    spec.write_text(yaml.safe_dump(data))
    seconds = run(str(spec))
    run_dir = tmp_path / "runs" / "verl_frozenlake"
    line = steps(run_dir)[1]
    assert line["actor/grad_norm"] > 0
    assert line["verl/training/rollout_probs_diff_max"] < 1e-6  # verl's actor agrees with the sampled log-probs
    assert line["gateway/calls_per_episode"] >= 1 and line["gateway/split_episodes"] == 0
    records = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(record["error"] is None for record in records)
    for record in records:  # every trained token is one the agent's calls sampled, with its log-prob
        trained = [row for row in expand_tokens(record) if row["mask"]]
        assert trained and all(row["logprob"] is not None for row in trained)
        assert record["metrics"]["gateway_calls"] >= 1 and [t for t in record["turns"] if t["role"] == "assistant"]
    print(f"\nthe openai agent on verl (CPU) through the gateway: 1 step in {seconds:.0f} s, "
          f"{line['gateway/calls_per_episode']:.1f} calls an episode")


def test_both_seats_of_a_self_play_game_train_inside_verl(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    """examples/selfplay_tictactoe.yaml on the verl backend (CPU), on SimpleNegotiation (free text: any reply
    of the untrained model is a move, so both seats play): each game gives verl one sample per seat, each
    its own tokens and reward, and `rae` measures each seat against its own baseline."""
    data = yaml.safe_load((ROOT / "examples" / "selfplay_tictactoe.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["tasks"]["train"].update({"game": "simplenegotiation", "count": 4})
    data["tasks"].pop("val")
    data["env"]["max_steps"] = 4  # two moves a seat
    data["workflow"]["max_turns"] = 2
    data["algorithm"].update({"group_size": 2, "entropy_coeff": 0.01})
    data["logging"] = {"episodes": "all"}
    data["backend"] = {"name": "verl", "device": "cpu", "total_steps": 1, "batch_size": 2, "lr": 0.01,
                       "max_new_tokens": 4, "max_prompt_tokens": 1024, "max_response_tokens": 512,
                       "micro_batch_size": 2, "save_every": 1, "timeout_s": 900,
                       "advantage": {"name": "rae", "decay": 0.9}}
    data.pop("profiles")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    seconds = run(str(spec))
    run_dir = tmp_path / "runs" / "selfplay_tictactoe"
    line = steps(run_dir)[1]
    assert line["actor/grad_norm"] > 0
    assert "advantage/baseline/simplenegotiation/seat0" in line and "advantage/baseline/simplenegotiation/seat1" in line
    records = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 2 * 2 * 2 and all(record["error"] is None for record in records)  # tasks x group x seats
    assert sorted(record["seat"] for record in records) == [0] * 4 + [1] * 4
    for record in records:  # each seat trained on its own model tokens, its own view of the game first
        trained = [row for row in expand_tokens(record) if row["mask"]]
        assert trained and all(row["logprob"] is not None for row in trained)
        assert f"Player {record['seat']}" in record["turns"][0]["content"]
    # rae's baselines are in verl's checkpoint, for --resume (sync_trainer's _save_checkpoint)
    kept = json.loads((run_dir / "checkpoints" / "global_step_1" / "estimator.json").read_text())
    assert abs(kept["baselines"]["simplenegotiation/seat0"] - line["advantage/baseline/simplenegotiation/seat0"]) < 1e-6
    print(f"\nself-play on verl (CPU): 1 step in {seconds:.0f} s")
