"""examples/explore_llm.yaml end to end, shrunk, against a local OpenAI-compatible stand-in.

The stand-in server replaces the hosted LLM the example names (none can be reached here); it
answers like one would, by routing on the request: the explorer gets Taxi moves, the
summarizer gets `<task>` blocks (one malformed), and the judge says yes only to tasks whose
query says so. Everything else is real: the `openai` client and our `OpenAIChat`, gymnasium
Taxi, the `random` explorer in LLM mode, the `llm` summarizer, the filters (feasibility re-solves
with the LLM and asks the judge), the ratio mixer, and the tiny policy trained by the torch
backend with `llm_judge` scoring the synthetic tasks.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from beyondagent_core.jsonl import read_tasks

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "explore_llm.yaml"
MOVES = itertools.cycle(["Action: north", "Action: south", "Action: east", "Action: west", "Action: pickup"])
TASKS = ('<task>{"query": "Move the taxi one row north (judge: yes).", "confidence": 0.9, '
         '"action_sequence": ["north"]}</task>\n'
         '<task>{"query": "Drive east once (judge: no).", "confidence": 0.8, "action_sequence": ["east"]}</task>\n'
         '<task>{"query": "Unsure guess", "confidence": 0.1, "action_sequence": ["west"]}</task>\n'
         '<task>{"query": "broken json", </task>')


def respond(body: dict) -> str:
    """Route like a hosted model would answer each of the run's prompts."""
    system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    text = json.dumps(body["messages"])
    if "grader" in system:
        return "<verdict>yes</verdict>" if "(judge: yes)" in text else "<verdict>no</verdict>"
    if "<task>" in text:
        return TASKS
    return next(MOVES)


@pytest.mark.beyondagent_plugins("gym", "random_explorer", "mixers", "torch", "llm")
def test_llm_exploration_summaries_filters_and_judge(openai_server, run_spec, tmp_path) -> None:
    openai_server.responder = respond
    result = run_spec(
        EXAMPLE, f"run.output_dir={tmp_path / 'runs'}", "model.path=tiny", f"llm.base_url={openai_server.base_url}",
        "llm.timeout=30", "tasks.train.count=3", "tasks.val.count=1", "env.max_steps=4", "explore.n=1",
        "explore.max_explore_step=3", "explore.workers=4", "workflow.max_turns=3", "algorithm.group_size=2",
        "algorithm.kl_coef=0", "backend.device=cpu", "backend.total_steps=2", "backend.batch_size=4",
        "backend.lr=0.001", "backend.max_new_tokens=4", "backend.max_episode_tokens=2048", "backend.eval_every=0",
        "backend.save_every=0", "backend.samples_per_step=8")

    synthetic = read_tasks(result.run_dir / "synthetic_tasks.jsonl")
    # Per seed: min_confidence drops the guess and feasibility the task the judge rejects; the
    # stand-in writes the same tasks for every seed, so dedup keeps one seed's only.
    assert [(t.query, t.ground_truth, t.confidence) for t in synthetic] == [
        ("Move the taxi one row north (judge: yes).", ["north"], 0.9)]
    events = [json.loads(line) for line in (result.run_dir / "events.jsonl").read_text().splitlines()]
    finished = next(e for e in events if e["event"] == "explore.finished")
    dropped = finished["dropped_by_filter"]
    # Dedup also compares with tasks still in flight elsewhere (feasibility runs outside the
    # commit lock), so how the 5 drops split between the two depends on timing.
    assert dropped["min_confidence"] == 3 and dropped["dedup"] + dropped["feasibility"] == 5
    assert dropped["feasibility"] >= 1  # the first seed's "judge: no" task
    assert finished["llm"]["calls"] > 0 and finished["failures"] == 0

    prompts = [json.dumps(r["messages"]) for r in openai_server.requests]
    assert any("You are exploring an environment" in p for p in prompts)
    assert sum("<task>" in p and "grader" not in p for p in prompts) >= 3
    samples = [json.loads(line) for line in (result.run_dir / "samples.jsonl").read_text().splitlines()]
    judged = [s["trajectory"] for s in samples if s["trajectory"]["task"]["origin"] == "synthetic"]
    assert judged and all(t["reward"]["reason"].startswith("llm_judge") for t in judged)
    assert all(t["reward"]["success"] for t in judged)  # the stand-in judge says yes to these tasks
