"""examples/appworld.yaml end to end, shrunk, on a generated world, against a local
OpenAI-compatible stand-in for the hosted LLM the example names (none can be reached here).

The stand-in answers like a model would, routed on the request: the explorer gets AppWorld code
actions (API discovery), the summarizer gets `<task>` blocks, the judge a verdict. Everything
else is real: AppWorld in its venv behind the launched env service, the `random` explorer in LLM
mode, the `llm` summarizer and filters, the ratio mixer, the tiny policy trained by the torch
backend, the `appworld` judge on original tasks and `llm_judge` on synthetic ones.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from beyondagent_core.jsonl import read_tasks

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "appworld.yaml"
ACTIONS = itertools.cycle([
    "First the apps.\n```python\nprint(apis.api_docs.show_app_descriptions())\n```",
    "Now Spotify's APIs.\n```python\nprint(apis.api_docs.show_api_descriptions(app_name=\"spotify\"))\n```",
])
TASKS = ('<task>{"query": "How many apps can I use? (judge: yes)", "confidence": 0.9, '
         '"action_sequence": ["print(apis.api_docs.show_app_descriptions())"]}</task>\n'
         '<task>{"query": "Unsure guess", "confidence": 0.1, "action_sequence": ["print(1)"]}</task>')


def respond(body: dict) -> str:
    system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
    text = json.dumps(body["messages"])
    if "grader" in system:
        return "<verdict>yes</verdict>" if "(judge: yes)" in text else "<verdict>no</verdict>"
    if "<task>" in text:
        return TASKS
    return next(ACTIONS)


@pytest.mark.beyondagent_plugins("appworld", "random_explorer", "mixers", "torch", "llm")
def test_the_example_explores_synthesizes_mixes_and_trains(openai_server: Any, run_spec: Any, world_root: Path,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "appworld")  # what the launched server (in the venv) loads
    monkeypatch.setenv("APPWORLD_ROOT", str(world_root))
    monkeypatch.setenv("OPENAI_API_KEY", "stand-in")
    openai_server.responder = respond
    result = run_spec(
        EXAMPLE, f"run.output_dir={tmp_path / 'runs'}", "model.path=tiny", f"llm.base_url={openai_server.base_url}",
        "llm.timeout=30", "tasks.train.limit=2", "tasks.val.limit=1", "env.max_turns=2", "explore.n=1",
        "explore.max_explore_step=2", "explore.workers=2", "workflow.max_turns=2", "algorithm.group_size=2",
        "algorithm.kl_coef=0", "backend.device=cpu", "backend.total_steps=1", "backend.batch_size=3",
        "backend.max_new_tokens=8", "backend.max_episode_tokens=2048", "backend.eval_every=0",
        "backend.save_every=0")

    synthetic = read_tasks(result.run_dir / "synthetic_tasks.jsonl")
    assert [t.query for t in synthetic] == ["How many apps can I use? (judge: yes)"]  # dedup: one for both seeds
    assert synthetic[0].seed_task_id in ("gen0000a_1", "gen0001a_1")
    prompts = [json.dumps(r["messages"]) for r in openai_server.requests]
    assert any("show_app_descriptions" in p for p in prompts)
    samples = [json.loads(line)["trajectory"] for line in (result.run_dir / "samples.jsonl").read_text().splitlines()]
    by_origin = {origin: [s for s in samples if s["task"]["origin"] == origin] for origin in ("original", "synthetic")}
    assert by_origin["original"] and by_origin["synthetic"]  # samples.jsonl keeps a sample of each step's episodes
    assert all("checks passed" in s["reward"]["reason"] for s in by_origin["original"])  # the appworld judge
    assert all(s["reward"]["reason"].startswith("llm_judge") for s in by_origin["synthetic"]), by_origin["synthetic"]
    assert result.metrics["steps"] == 1 and result.metrics["train/episode_errors"] == 0.0
    assert result.metrics["train/synthetic_fraction"] == pytest.approx(1 / 3)  # 2 originals + 1 synthetic
