"""A short GRPO run of the tiny model on `arithmetic` with no env, every reward recomputed here.

The run is real (torch backend, tiny model, `math_cot`, `math_answer` with `last_number` and
`truncated_score: null`: the tiny model never ends a reply within 8 tokens, so every reply is
cut off). The test keeps every episode (`samples_per_step` above the batch) and recomputes
each one's reward on its own: the expression evaluated with Python's parser over exact
fractions, the reply's stated numbers found character by character (an operand of an
operator or `=`, or one after "not", is not stated). It also checks that each turn's
`finish_reason` is what its token ids say, that the judge's default scores the cut-off replies
`truncated`, and that the reward mean the trainer logged matches.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
from fractions import Fraction
from pathlib import Path

import pytest
from beyondagent_plugin_math.config import MathAnswerConfig
from beyondagent_plugin_math.judges import MathAnswerJudge

from beyondagent_core import Trajectory

metrics_log = pytest.importorskip("beyondagent_plugin_torch.metrics_log")
read_metrics, read_samples = metrics_log.read_metrics, metrics_log.read_samples
load_tokenizer = pytest.importorskip("beyondagent_plugin_torch.models").load_tokenizer

pytestmark = pytest.mark.beyondagent_plugins("math", "torch", "mixers")

GROUP, BATCH, STEPS, NEW_TOKENS = 8, 4, 2, 8
_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?|-?\d+(?:\.\d+)?%?|-?\.\d+%?")
OPERATORS = "+-*/^×÷·"
OPERATOR_WORDS_BEFORE = ("plus", "minus", "times", "over", "by")
OPERATOR_WORDS_AFTER = ("plus", "minus", "times", "over", "divided", "multiplied")
MARKED = re.compile(r"answer|\\boxed|\\fbox|####|```|<python>", re.IGNORECASE)


def arithmetic_spec(**backend: object) -> dict:
    return {
        "run": {"name": "math", "seed": 0},
        "model": {"path": "tiny"},
        "tasks": {"train": {"name": "arithmetic", "level": 1, "count": 8},
                  "val": {"name": "arithmetic", "level": 1, "split": "val", "count": 4}},
        "workflow": {"name": "math_cot", "system_prompt": "Answer with a number."},
        "reward": {"name": "math_answer", "last_number": True, "truncated_score": None},
        "mixture": {"name": "original"},
        "algorithm": {"group_size": GROUP, "kl_coef": 0.0},
        "backend": {"name": "torch", "device": "cpu", "batch_size": BATCH, "lr": 5e-3, "max_new_tokens": NEW_TOKENS,
                    "max_episode_tokens": 128, "total_steps": STEPS, "micro_batch_size": 32,
                    "samples_per_step": 1000, **backend},
        "plugins": {"require": []},
    }


def stated_numbers(reply: str) -> list[str]:
    """The numbers a reply states: not next to an operator or `=`, not after "not"/"no"/"never"
    (a number glued to a word piece, `as4`, counts: the tiny model's replies are like that)."""
    stated = []
    for match in _NUMBER.finditer(reply):
        if match.start() and (reply[match.start() - 1].isdigit() or reply[match.start() - 1] == "."):
            continue  # inside a longer number
        number = match.group(0)
        glued = reply[match.start() - 1] if match.start() else " "
        left = reply[max(0, match.start() - 24):match.start()].rstrip(" \t")
        right = reply[match.end():match.end() + 24].lstrip(" \t")
        left_word = left.split()[-1].lower() if left.split() else ""
        right_word = right.split()[0].lower() if right.split() else ""
        if number.startswith("-") and (glued.isalnum() or glued == "_" or (left and left[-1] in "0123456789)]}")):
            continue  # a minus between two operands: `5-3`, `x-3`, `5 -3`
        if (left and left[-1] in OPERATORS) or left_word in OPERATOR_WORDS_BEFORE + ("not", "no", "never"):
            continue
        if (right and right[0] in OPERATORS + "=<>") or right_word.startswith(OPERATOR_WORDS_AFTER):
            continue
        stated.append(number)
    return stated


def as_fraction(text: str) -> list[Fraction]:
    stated = Fraction(text.replace(",", "").rstrip("%"))
    return [stated, stated / 100] if text.endswith("%") else [stated]


def expected_score(reply: str, expression: str) -> float | None:
    """The reward the reply earns; None for a reply with a marker or code (left to the judge's own tests)."""
    if MARKED.search(reply):
        return None
    value = eval(re.sub(r"(\d+)", r"Fraction(\1)", expression), {"Fraction": Fraction})
    whole = reply.strip().rstrip(".")
    if whole and all(char.isdigit() or char in OPERATORS + "=()., \t\n" for char in whole):
        # A reply that is only a number or an expression is the answer as a whole: `0 + 3` is not 3.
        numbers = [whole] if _NUMBER.fullmatch(whole) else []
    else:
        numbers = stated_numbers(reply)[-1:]
    if not numbers:
        return 0.0
    readings = as_fraction(numbers[0])
    return 1.0 if any(abs(r - value) <= Fraction(1, 10**6) * max(abs(r), abs(value)) for r in readings) else 0.0


def test_every_reward_of_a_short_run_is_what_an_independent_check_says(run_spec) -> None:
    result = run_spec(arithmetic_spec())
    samples = [s for s in read_samples(result.run_dir) if s["split"] == "train"]
    assert len(samples) == GROUP * BATCH * STEPS
    tokenizer = load_tokenizer("tiny")
    stops = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
    default_judge, checked = MathAnswerJudge(MathAnswerConfig(last_number=True)), 0
    for sample in samples:
        trajectory = sample["trajectory"]
        assert trajectory["error"] is None
        assert trajectory["task"]["env"] is None
        roles = [turn["role"] for turn in trajectory["turns"]]
        assert roles == ["system", "user", "assistant"]
        turn = trajectory["turns"][-1]
        cut = len(turn["token_ids"]) == NEW_TOKENS and turn["token_ids"][-1] not in stops
        assert turn["finish_reason"] == ("length" if cut else "stop")
        expected = expected_score(turn["content"], trajectory["task"]["metadata"]["expression"])
        if expected is not None:
            checked += 1
            assert trajectory["reward"]["score"] == expected, (
                turn["content"], trajectory["task"]["ground_truth"], trajectory["reward"])
        if cut:  # the default `truncated_score: 0` would have scored it 0, saying why
            saved = Trajectory.from_dict(trajectory)
            reward = asyncio.run(default_judge.score(saved.task, saved))
            assert (reward.score, reward.details["status"]) == (0.0, "truncated")
    assert checked >= len(samples) * 3 // 4
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
