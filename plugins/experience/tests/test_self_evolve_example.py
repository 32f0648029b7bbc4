"""examples/self_evolve.yaml end to end, shrunk: all three mechanisms in one training run.

The spec's `llm` is `openai_server` (an OpenAI-compatible server on loopback standing in for the
hosted model the example names): it answers each prompt the way a model would, by routing on the
request — Taxi moves for the explorer and the policy-free parts, `<task>` blocks for the task
summarizer, verdicts for the judge, GOOD/BAD step labels for ADCA, `<lesson>`s for the experience
summarizer. Everything else is real: gymnasium Taxi, exploration and filters, the ratio mixer,
the tiny policy trained by the torch backend with ADCA advantages and experience-guided rollouts.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "self_evolve.yaml"
MOVES = itertools.cycle(["Action: north", "Action: south", "Action: east", "Action: west", "Action: pickup"])
TASKS = ('<task>{"query": "Move the taxi one row north (judge: yes).", "confidence": 0.9, '
         '"action_sequence": ["north"]}</task>')


def respond(body: dict) -> str:
    text = json.dumps(body["messages"])
    system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    if "Label every step" in text:
        count = len(re.findall(r"Step \d+\\nACTION", text))
        return "\n".join(f"Step {n}: {'GOOD' if n % 2 else 'BAD'}" for n in range(1, count + 1))
    if "Learn from its attempts" in text:
        return '<lesson kind="failure">Driving into a wall wastes a move.</lesson>'
    if "grader" in system:
        return "<verdict>yes</verdict>" if "(judge: yes)" in text else "<verdict>no</verdict>"
    if "<task>" in text:
        return TASKS
    return next(MOVES)


@pytest.mark.beyondagent_plugins("gym", "random_explorer", "mixers", "torch", "experience", "llm")
def test_questioning_navigating_and_attributing_in_one_run(openai_server, run_spec, tmp_path) -> None:
    openai_server.responder = respond
    result = run_spec(
        EXAMPLE, f"run.output_dir={tmp_path / 'runs'}", "model.path=tiny", f"llm.base_url={openai_server.base_url}",
        "llm.timeout=30", "tasks.train.count=2", "tasks.val.count=1", "env.max_steps=3", "explore.n=1",
        "explore.max_explore_step=2", "explore.workers=2", "workflow.max_turns=3", "algorithm.group_size=2",
        "algorithm.kl_coef=0", "backend.device=cpu", "backend.total_steps=2", "backend.batch_size=2",
        "backend.lr=0.001", "backend.max_new_tokens=4", "backend.max_episode_tokens=2048", "backend.eval_every=0",
        "backend.save_every=0", "backend.samples_per_step=4", f"experience.path={tmp_path / 'lessons.sqlite'}",
        "experience.ratio=1.0")
    rows = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in rows if "advantage/active" in row]
    assert len(steps) == 2
    assert all(row["advantage/active"] == 1 and row["advantage/fallback_groups"] == 0 for row in steps)
    assert steps[0]["experience/added"] == 1  # the LLM's lesson, stored once
    assert steps[1]["experience/hit_rate"] == 1 and steps[1]["experience/guided_fraction"] > 0
    assert (result.run_dir / "synthetic_tasks.jsonl").is_file()
