"""verl's own trainer on this CPU machine: `backend.device: cpu` (cpu_platform.py, cpu_rollout.py).

`beyondagent run` launches verl's V1 trainer (Ray, FSDP2, the agent loop, the transfer queue,
checkpoints) with our CPU platform and transformers rollout replica, on the tiny model and
FrozenLake, the episodes a plain `openai` SDK agent's through the gateway. Two steps, then
`--resume` to a third, trained with PPO (`backend.advantage: gae`: verl's GAE and its critic worker,
as the `critic:` section maps; the other estimators run in verl's trainer in the tests below). What
is checked is what only a real step shows:

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
import re
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


def test_an_openai_agent_trains_with_ppo_on_cpu_then_resumes(verl_venv: Any, tiny_model: str,
                                                             tmp_path: Path) -> None:
    """The episodes are examples/agent_openai.yaml's agent (a plain `openai` SDK loop, unchanged): each
    agent-loop worker serves the gateway, verl's server manager generates behind it, and verl trains on
    exactly the ids the server sampled. PPO, checkpoints and `--resume` as the module says (one run for
    both: a verl start-up costs minutes on 2 cores)."""
    spec = cpu_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())  # PPO: verl's GAE from its critic worker
    data["backend"]["advantage"] = {"name": "gae", "lam": 0.95}
    data["critic"] = {"lr": 1e-3}
    data["workflow"] = yaml.safe_load((ROOT / "examples" / "agent_openai.yaml").read_text())["workflow"]
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
        assert line["gateway/calls_per_episode"] >= 1 and line["gateway/split_episodes"] == 0
    assert by_step[1]["verl/actor/entropy"] != by_step[2]["verl/actor/entropy"]  # the weights moved
    checkpoints = run_dir / "checkpoints"
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert (checkpoints / "global_step_1" / "actor").is_dir() and (checkpoints / "global_step_2" / "actor").is_dir()
    assert (checkpoints / "global_step_2" / "critic").is_dir()
    records = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert sorted({r["step"] for r in records}) == [1, 2] and len(records) == 2 * 2 * 2
    assert all(record["error"] is None for record in records)
    for record in records:  # every trained token is one the agent's calls sampled, with its log-prob
        trained = [row for row in expand_tokens(record) if row["mask"]]
        assert trained and all(row["logprob"] is not None for row in trained)
        assert record["metrics"]["gateway_calls"] >= 1 and [t for t in record["turns"] if t["role"] == "assistant"]
    record = json.loads((run_dir / "reproduce.json").read_text())  # what runs it again, the backend's part too
    assert (record["backend"], record["device"], record["precision"]) == ("verl", "cpu", {"compute": "float32",
                                                                                          "params": "float32"})

    second = run("--resume", str(spec), "backend.total_steps=3")
    by_step = steps(run_dir)
    assert sorted(by_step) == [1, 2, 3]  # steps 1 and 2 were not run again
    assert by_step[3]["actor/grad_norm"] > 0 and by_step[3]["verl/critic/vf_loss"] > 0
    assert (checkpoints / "global_step_3" / "critic").is_dir()  # the resumed critic trained on and was saved
    assert by_step[3]["verl/training/rollout_probs_diff_max"] < 1e-6  # the checkpoint's weights reached the rollout
    assert by_step[3]["gateway/calls_per_episode"] >= 1
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    print(f"\nthe openai agent on verl (CPU) with PPO: 2 steps in {first:.0f} s, resumed to step 3 in {second:.0f} s "
          f"(step time {by_step[2]['perf/step_time_s']:.1f} s after the first, "
          f"{by_step[2]['gateway/calls_per_episode']:.1f} gateway calls an episode)")


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


def test_experience_guided_rollouts_train_off_policy_inside_verls_trainer(verl_venv: Any, tiny_model: str,
                                                                          tmp_path: Path, openai_server: Any) -> None:
    """`experience` with `backend: verl`: the agent loop shows half of each group the store's lessons
    and returns those episodes stripped of them (`training: strip`); our trainer marks them
    off-policy for our loss; the step's episodes are summarized into the store by the LLM
    (`openai_server`: a loopback stand-in for a hosted LLM). The store is seeded, as an earlier
    run would have left it, so the first step is guided.

    In the same run (a verl start-up is a minute), two more things: `backend.advantage: gigpo`, verl's
    trainer running our step-level estimator on the agent loop's step records, the advantages it trained
    with reaching `episodes.jsonl`; and the env behind an env service each agent-loop worker launched
    (`env.service: launch`)."""
    from beyondagent_plugin_experience.store import SqliteExperienceStore

    from beyondagent_core.experience import Experience

    store_path = tmp_path / "lessons.sqlite"
    seeded = SqliteExperienceStore(path=store_path)
    seeded.add([Experience(text="On FrozenLake, move right then down to reach the goal.", task_id="any",
                           query="Reach the goal G without falling into a hole")])
    seeded.close()
    openai_server.responder = lambda body: '<lesson kind="failure">Walking into the wall wastes a turn.</lesson>'
    spec = cpu_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["backend"].update({"total_steps": 1, "save_every": 0, "max_prompt_tokens": 512,  # lessons included
                            "advantage": {"name": "gigpo"}})
    data["env"]["service"] = "launch"  # and each agent-loop worker starts its own env service
    data["experience"] = {"name": "experience", "path": str(store_path), "mode": "mixed", "ratio": 0.5,
                          "training": "strip", "summarizer": "llm",
                          "llm": {"base_url": openai_server.base_url, "model": "m"}}
    spec.write_text(yaml.safe_dump(data))
    seconds = run(str(spec))
    run_dir = tmp_path / "runs" / "verl_frozenlake"
    line = steps(run_dir)[1]
    assert line["experience/guided_fraction"] == 0.5 and line["experience/hit_rate"] == 1.0
    assert line["experience/added"] == 1 and line["experience/total"] == 2
    assert "train/success_rate_guided" in line and "train/success_rate_unguided" in line
    assert line["verl/actor/off_policy_token_fraction"] > 0  # the flags reached the actor's loss
    # the stripped samples' tokens were sampled with the lessons in the context: verl's actor, reading
    # them without, gives other log-probs (on-policy samples agree to 1e-9, test above)
    assert line["verl/training/rollout_probs_diff_max"] > 1e-6
    records = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 4 and sum(r["guided"] for r in records) == 2
    assert all(r["off_policy"] == r["guided"] for r in records)
    for group in (0, 1):  # a stripped sample's prompt is exactly its unguided sibling's
        guided, unguided = sorted((r for r in records if r["group"] == group), key=lambda r: not r["guided"])
        prompt = [[t["id"] for t in expand_tokens(r)][:[t["mask"] for t in expand_tokens(r)].index(1)]
                  for r in (guided, unguided)]
        assert prompt[0] == prompt[1]
        assert "<experience>" not in "".join(t["text"] for t in expand_tokens(guided))
    assert [e.kind for e in SqliteExperienceStore(path=store_path).all()] == ["hindsight", "failure"]
    # GiGPO ran, on the episodes' states; the records carry the advantages verl trained with: their
    # mean, max and min over the model's tokens are verl's own `critic/advantages` of the step
    assert line["advantage/anchor_groups"] >= 1 and line["actor/grad_norm"] > 0
    assert all(record["step_values"] is not None and record["error"] is None for record in records)
    trained = [row["advantage"] for record in records for row in expand_tokens(record) if row["mask"]]
    assert abs(sum(trained) / len(trained) - line["verl/critic/advantages/mean"]) < 1e-3
    assert abs(max(trained) - line["verl/critic/advantages/max"]) < 1e-3
    assert abs(min(trained) - line["verl/critic/advantages/min"]) < 1e-3
    verl_dir = run_dir / "verl"
    assert "envservice.launched" in (verl_dir / "verl.log").read_text()
    assert yaml.safe_load((verl_dir / "verl_config.yaml").read_text())["trainer"]["v1"]["trainer_mode"] == \
        "beyondagent_sync"
    print(f"\nverl on CPU with experience-guided rollouts, gigpo and a launched env service: 1 step in {seconds:.0f} s")


def frozenlake_success(task_id: str) -> Any:
    """A successful episode of a 2x2 FrozenLake task, played in the env (one of its two two-move paths)."""
    from beyondagent_plugin_gym.config import FrozenLakeConfig
    from beyondagent_plugin_gym.frozenlake import FrozenLake

    from beyondagent_core.types import Reward, Task, Trajectory, Turn

    for path in (["right", "down"], ["down", "right"]):
        env = FrozenLake(FrozenLakeConfig())
        reset = env.reset(Task(task_id=task_id, env="frozenlake", metadata={"size": 2}))
        turns = [Turn(m["role"], m["content"]) for m in reset.messages]
        for move in path:
            step = env.step({"role": "assistant", "content": f"Action: {move}"})
            turns += [Turn("assistant", f"Action: {move}", token_ids=[1])] + [
                Turn(m["role"], m["content"]) for m in step.observation]
            if step.terminated:
                break
        if step.reward == 1.0:
            task = Task(task_id=task_id, env="frozenlake", metadata=reset.info["metadata"])
            return Trajectory(task=task, turns=turns, reward=Reward(score=1.0, success=True))
    raise AssertionError(f"{task_id}: no two-move path")


def test_worked_examples_and_prefixes_inside_verl_and_validation_never_shows_a_tasks_own(
        verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    """Navigating without an LLM on verl: of each group of 4, one sample is shown worked examples
    (successful episodes from the store), two start from a stored success of their task (its first
    move replayed: in the prompt, never trained), one is plain; validation shows every sample the
    examples of other maps only (2x2 FrozenLake's val maps are all train maps too)."""
    import asyncio

    from beyondagent_plugin_experience.config import ExperienceStoreConfig
    from beyondagent_plugin_experience.store import SqliteExperienceStore

    store_path = tmp_path / "examples.sqlite"
    seeded = SqliteExperienceStore(ExperienceStoreConfig(summarizer="trajectory"), path=store_path)
    seeded.add(asyncio.run(seeded.summarize([frozenlake_success(f"frozenlake-train-{i}") for i in range(3)], step=0)))
    seeded.close()
    spec = cpu_spec(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["tasks"]["val"] = {"name": "gym_tasks", "env": "frozenlake", "split": "val", "count": 2, "size": 2}
    data["algorithm"]["group_size"] = 4
    data["backend"].update({"total_steps": 1, "save_every": 0, "eval_every": 1, "max_prompt_tokens": 1024})
    data["experience"] = {"name": "experience", "path": str(store_path), "summarizer": "trajectory", "mode": "mixed",
                          "ratio": 0.25, "prefix_ratio": 0.5, "val_mode": "all"}
    spec.write_text(yaml.safe_dump(data))
    seconds = run(str(spec))
    run_dir = tmp_path / "runs" / "verl_frozenlake"
    line = steps(run_dir)[1]
    assert line["experience/guided_fraction"] == 0.25 and line["experience/prefixed_fraction"] == 0.5
    assert line["experience/prefix_turns"] == 1.0 and "train/success_rate_prefixed" in line
    assert line["experience/val_guided_fraction"] == 1.0 and line["experience/val_leaks_blocked"] == 0
    records = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]
    prefixed = [r for r in records if r["split"] == "train" and r["metrics"].get("prefix_turns")]
    assert len(prefixed) == 4 and not any(r["off_policy"] for r in prefixed)
    for record in prefixed:  # the replayed move is verl's prompt; the response is the policy's own
        tokens = expand_tokens(record)
        prompt = "".join(t["text"] for t in tokens[:[t["mask"] for t in tokens].index(1)])
        assert next(t["content"] for t in record["turns"] if t["role"] == "assistant") in prompt
    from beyondagent_core.experience import same_task

    examples = SqliteExperienceStore(path=store_path).all()
    for record in (r for r in records if r["split"] == "val"):
        scored = frozenlake_success(record["task_id"]).task
        seen = "".join(t["text"] for t in expand_tokens(record))
        assert not any(e.text in seen for e in examples if same_task(e, scored))
        assert any(e.text in seen for e in examples if not same_task(e, scored))  # what it saw: not stripped
        assert not record["off_policy"]
    print(f"\nverl on CPU with worked examples and prefixes: 1 step and validation in {seconds:.0f} s")


TAXI_TASK = ('<task>{"query": "Move the taxi one row north (judge: yes).", "confidence": 0.9, '
             '"action_sequence": ["north"]}</task>')


def hosted_llm(body: dict[str, Any]) -> str:
    """What the example's hosted LLM is asked, answered the way a model would (routed on the request)."""
    text = json.dumps(body["messages"])
    system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    if "Label every step" in text:  # ADCA's step judge
        count = len(re.findall(r"Step \d+\\nACTION", text))
        return "\n".join(f"Step {n}: {'GOOD' if n % 2 else 'BAD'}" for n in range(1, count + 1))
    if "Learn from its attempts" in text:  # the experience summarizer; "taxi" lets BM25 retrieve the lesson for
        # every Taxi task (an original Taxi task's query is its id, `taxi-train-1`)
        return '<lesson kind="failure">Driving the taxi into a wall wastes a move.</lesson>'
    if "grader" in system:  # llm_judge on synthetic tasks
        return "<verdict>yes</verdict>" if "(judge: yes)" in text else "<verdict>no</verdict>"
    if "<task>" in text:  # the exploration summarizer
        return TAXI_TASK
    return "Action: north"  # the explorer


def test_the_self_evolve_example_runs_all_three_mechanisms_in_verl(verl_venv: Any, tiny_model: str, tmp_path: Path,
                                                                   openai_server: Any) -> None:
    """examples/self_evolve.yaml with only its backend block changed to verl (on CPU): exploration
    writes synthetic Taxi tasks judged by the LLM inside verl's rollout workers, ADCA labels steps in
    verl's trainer (the LLM-judged estimator's own checks are here: a run of their own cost a minute of
    verl start-up), lessons guide the second step's rollouts and their samples train off-policy.
    `openai_server` is a loopback stand-in for the example's hosted LLM."""
    openai_server.responder = hosted_llm
    data = yaml.safe_load((ROOT / "examples" / "self_evolve.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["model"]["path"] = "tiny"
    data["llm"].update({"base_url": openai_server.base_url, "timeout": 30})
    data["tasks"]["train"]["count"] = 2
    data["tasks"].pop("val")
    data["env"]["max_steps"] = 3
    data["explore"].update({"n": 1, "max_explore_step": 2, "workers": 2})
    data["workflow"]["max_turns"] = 3
    data["algorithm"].update({"group_size": 2, "kl_coef": 0})
    data["experience"].update({"path": str(tmp_path / "lessons.sqlite"), "ratio": 1.0})
    data["backend"] = {"name": "verl", "device": "cpu", "advantage": data["backend"]["advantage"], "total_steps": 2,
                       "batch_size": 2, "lr": 0.01, "max_new_tokens": 4, "max_prompt_tokens": 1024,
                       "max_response_tokens": 512, "micro_batch_size": 2, "save_every": 0, "timeout_s": 900}
    data["plugins"]["require"] = [r.replace("-torch", "-verl") for r in data["plugins"]["require"]]
    data["logging"] = {"episodes": "all"}
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    seconds = run(str(spec))
    run_dir = tmp_path / "runs" / "self-evolve"
    by_step = steps(run_dir)
    assert sorted(by_step) == [1, 2]
    assert all(line["advantage/active"] == 1 and line["advantage/fallback_groups"] == 0 for line in by_step.values())
    assert by_step[1]["experience/added"] == 1  # the LLM's lesson, stored once
    assert by_step[2]["experience/hit_rate"] == 1 and by_step[2]["experience/guided_fraction"] == 1
    assert by_step[2]["verl/actor/off_policy_token_fraction"] > 0
    assert (run_dir / "synthetic_tasks.jsonl").is_file()
    # ADCA inside verl's trainer process (the step judge labels odd steps GOOD, even ones BAD): every
    # episode judged, its step rewards in the records, the share of GOOD steps the labels give, and the
    # advantages verl trained with are the records' (their token mean is verl's `critic/advantages/mean`)
    records = [json.loads(x) for x in (run_dir / "episodes.jsonl").read_text().splitlines()]
    for step, line in by_step.items():
        of_step = [r for r in records if r["step"] == step and r["split"] == "train"]
        assert line["advantage/judged"] == len(of_step) == 4 and all(r["step_values"] for r in of_step)
        labelled = [len(r["step_values"]) for r in of_step]
        good = sum((count + 1) // 2 for count in labelled)  # steps 1, 3, 5, ... of each episode
        assert abs(line["advantage/good_step_share"] - good / sum(labelled)) < 1e-6
        trained = [row["advantage"] for r in of_step for row in expand_tokens(r) if row["mask"]]
        assert abs(sum(trained) / len(trained) - line["verl/critic/advantages/mean"]) < 1e-3
    origins = {record["origin"] for record in records}
    print(f"\nself_evolve.yaml on verl (CPU): explore + 2 steps in {seconds:.0f} s; episode origins {sorted(origins)}")
