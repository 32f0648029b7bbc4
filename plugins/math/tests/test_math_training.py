"""A short GRPO run of the tiny model on `arithmetic` with no env, every reward recomputed here.

The run is real (torch backend, tiny model, `math_cot`, `math_answer`); the test keeps every
episode (`samples_per_step` above the batch) and recomputes each one's reward on its own: the
expression evaluated with Python's parser over exact fractions, the reply's last number read
with a separate regex. It also checks the reward mean the trainer logged matches.
"""

from __future__ import annotations

import json
import re
import statistics
from fractions import Fraction
from pathlib import Path

import pytest

metrics_log = pytest.importorskip("beyondagent_plugin_torch.metrics_log")
read_metrics, read_samples = metrics_log.read_metrics, metrics_log.read_samples

pytestmark = pytest.mark.beyondagent_plugins("math", "torch", "mixers")

GROUP, BATCH, STEPS = 8, 4, 2
_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?|-?\d+(?:\.\d+)?%?|-?\.\d+%?")


def arithmetic_spec(**backend: object) -> dict:
    return {
        "run": {"name": "math", "seed": 0},
        "model": {"path": "tiny"},
        "tasks": {"train": {"name": "arithmetic", "level": 1, "count": 8},
                  "val": {"name": "arithmetic", "level": 1, "split": "val", "count": 4}},
        "workflow": {"name": "math_cot", "system_prompt": "Answer with a number."},
        "reward": {"name": "math_answer", "last_number": True},
        "mixture": {"name": "original"},
        "algorithm": {"group_size": GROUP, "kl_coef": 0.0},
        "backend": {"name": "torch", "device": "cpu", "batch_size": BATCH, "lr": 5e-3, "max_new_tokens": 8,
                    "max_episode_tokens": 128, "total_steps": STEPS, "micro_batch_size": 32,
                    "samples_per_step": 1000, **backend},
        "plugins": {"require": []},
    }


def expected_score(reply: str, expression: str) -> float:
    value = eval(re.sub(r"(\d+)", r"Fraction(\1)", expression), {"Fraction": Fraction})
    numbers = _NUMBER.findall(reply)
    if not numbers:
        return 0.0
    text = numbers[-1]
    stated = Fraction(text.replace(",", "").rstrip("%"))
    readings = [stated, stated / 100] if text.endswith("%") else [stated]
    return 1.0 if any(abs(r - value) <= Fraction(1, 10**6) * max(abs(r), abs(value)) for r in readings) else 0.0


def test_every_reward_of_a_short_run_is_what_an_independent_check_says(run_spec) -> None:
    result = run_spec(arithmetic_spec())
    samples = [s for s in read_samples(result.run_dir) if s["split"] == "train"]
    assert len(samples) == GROUP * BATCH * STEPS
    for sample in samples:
        trajectory = sample["trajectory"]
        assert trajectory["error"] is None
        assert trajectory["task"]["env"] is None
        roles = [turn["role"] for turn in trajectory["turns"]]
        assert roles == ["system", "user", "assistant"]
        reply = trajectory["turns"][-1]["content"]
        assert trajectory["reward"]["score"] == expected_score(reply, trajectory["task"]["metadata"]["expression"]), (
            reply, trajectory["task"]["ground_truth"], trajectory["reward"])
    # The logged per-step reward mean is the mean of those rewards.
    logged = [r["train/reward_mean"] for r in read_metrics(result.run_dir) if "train/reward_mean" in r]
    for step, mean in enumerate(logged, start=1):
        scores = [s["trajectory"]["reward"]["score"] for s in samples if s["step"] == step]
        assert mean == pytest.approx(statistics.fmean(scores))
    assert result.metrics["steps"] == STEPS


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_arithmetic_example_plans_as_written(run_spec) -> None:
    plan = run_spec(EXAMPLES / "math_arithmetic.yaml", dry_run=True).plan
    assert plan is not None


def test_the_gsm8k_example_runs_with_the_tiny_model_and_a_small_file(run_spec, tmp_path) -> None:
    lines = [{"question": f"Tom has {i} apples and buys 2 more. How many now?",
              "answer": f"{i} + 2 = {i + 2}\n#### {i + 2}"} for i in range(4)]
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = run_spec(EXAMPLES / "math_gsm8k.yaml", "model.path=tiny", "model.dtype=auto", f"tasks.train.path={data}",
                      f"tasks.val.path={data}", "backend.device=cpu", "backend.total_steps=1", "backend.batch_size=2",
                      "algorithm.group_size=2", "backend.max_new_tokens=8", "backend.max_episode_tokens=512",
                      "backend.mini_batch_size=null", "backend.micro_batch_size=4", "backend.eval_every=0",
                      "backend.save_every=0", "backend.report=false", "backend.samples_per_step=100")
    samples = [s for s in read_samples(result.run_dir) if s["split"] == "train"]
    assert len(samples) == 4
    for sample in samples:
        trajectory = sample["trajectory"]
        assert trajectory["error"] is None and trajectory["reward"]["score"] in (0.0, 1.0)
        assert trajectory["turns"][0]["role"] == "system" and "```python" in trajectory["turns"][0]["content"]
        assert 1 <= trajectory["metrics"]["turns"] <= 4
