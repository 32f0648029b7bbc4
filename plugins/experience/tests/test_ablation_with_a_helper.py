"""The self-evolve ablation script in AgentEvolver's setup: a small policy trained while a larger model
(here `openai_server`, an OpenAI-compatible server on loopback standing in for it) writes the lessons and
judges the steps (`benchmarks/self_evolve_ablation.py --helper`).

Real: the script (each arm a `beyondagent run` child process), the arithmetic family on the math
example's `smollm2` profile with the tiny model as the policy, the experience store, ADCA. Checked:
each LLM role went to the helper and what it produced is counted per arm, every run directory
records what reproduces it, and the summary names the runs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "benchmarks" / "self_evolve_ablation.py"


def respond(body: dict) -> str:
    text = json.dumps(body["messages"])
    if "Label every step" in text:
        count = len(re.findall(r"Step \d+\\nACTION", text))
        return "\n".join(f"Step {n}: GOOD" for n in range(1, count + 1))
    if "Learn from its attempts" in text:
        return '<lesson kind="failure">Add the tens first, then the units.</lesson>'
    return "I cannot help with that."


def test_the_ablation_asks_the_helper_for_every_llm_role(openai_server, tmp_path: Path) -> None:
    from beyondagent_plugin_torch.tiny import tiny_model_dir

    openai_server.responder = respond
    helper = f"{{model: helper-7b, base_url: {openai_server.base_url}, timeout: 30}}"
    out = tmp_path / "ablation"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--model", str(tiny_model_dir()), "--families", "arithmetic",
         "--arms", "grpo,navigating,attributing", "--steps", "2", "--seeds", "1", "--window", "1", "--out", str(out),
         "--helper", helper, "--set", "backend.batch_size=2", "--set", "algorithm.group_size=2",
         "--set", "tasks.train.count=4", "--set", "tasks.val.count=2", "--set", "backend.max_new_tokens=4",
         "--set", "experience.ratio=1.0"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    rows = {row["arm"]: row for row in json.loads((out / "ablation.json").read_text())["rows"]}
    assert list(rows) == ["grpo", "navigating", "attributing"]
    assert rows["grpo"]["roles"] == {}
    assert rows["navigating"]["roles"]["lessons_stored"] >= 1  # the helper's lessons
    attributing = rows["attributing"]["roles"]
    assert attributing["steps_judged"] >= 1 and attributing["judge_failures"] == 0
    assert attributing["groups_left_to_grpo"] == 0
    assert openai_server.requests and all(r["model"] == "helper-7b" for r in openai_server.requests)
    for row in rows.values():
        (run_dir,) = row["runs"]
        record = json.loads((Path(run_dir) / "reproduce.json").read_text())
        assert record["seed"] == 0 and record["model"]["sha256"] and record["precision"]["params"] == "float32"
        assert len(row["train_success_per_seed"]) == 1 and row["val_after"] is not None
    assert "success_ratio_vs_grpo (arithmetic): navigating=" in result.stdout
    assert (out / "self_evolve_ablation_arithmetic.png").stat().st_size > 0
