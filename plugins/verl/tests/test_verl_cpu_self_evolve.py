"""The self-evolve mechanisms inside verl's own trainer on this CPU machine (`backend.device: cpu`).

The same set-up as test_verl_cpu_training.py (its spec and helpers): `beyondagent run` launches
verl's V1 trainer on the tiny model, here with what the self-evolve loop adds to a step: lessons
and worked examples guiding rollouts (trained off-policy, or replayed as prefixes), the LLM-free
and the LLM-judged step credit, and exploration's synthetic tasks. A file of its own so that its
runs and the other file's go to different test workers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from test_verl_cpu_training import ROOT, cpu_spec, run, steps

from beyondagent_core.episode_records import expand_tokens


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
