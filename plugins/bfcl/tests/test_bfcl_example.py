"""examples/bfcl.yaml end to end with the tiny model on a CPU, then `beyondagent eval` on it.

Everything is real: BFCL's tasks, its backends and checkers in the BFCL venv behind the launched
env service, LLM-free exploration (`random_actions`) with the hindsight summarizer, the ratio
mixer, the tiny policy trained by the torch backend. Then `beyondagent eval` on the run's
checkpoint reports accuracy per BFCL category, and BFCL's own evaluator, run on the same
recorded outputs, gives the same numbers.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "bfcl.yaml"
SMALL = ("model.path=tiny", "tasks.train.limit=2", "tasks.val.limit=1", "explore.max_explore_step=3",
         "workflow.max_turns=3", "backend.max_new_tokens=8", "backend.max_episode_tokens=4096")


@pytest.mark.beyondagent_plugins("bfcl", "random_explorer", "mixers", "torch")
def test_the_example_explores_synthesizes_and_trains(run_spec: Any, bfcl_venv: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", "bfcl")  # what the launched server (in the venv) loads
    started = time.monotonic()
    result = run_spec(EXAMPLE, f"run.output_dir={tmp_path / 'runs'}", *SMALL)
    seconds = time.monotonic() - started
    assert result.metrics["steps"] == 2 and result.metrics["train/episode_errors"] == 0.0
    synthetic = [json.loads(line) for line in (result.run_dir / "synthetic_tasks.jsonl").read_text().splitlines()]
    assert synthetic and all(task["metadata"]["goal"]["kind"] == "calls" for task in synthetic)
    samples = [json.loads(line)["trajectory"] for line in (result.run_dir / "samples.jsonl").read_text().splitlines()]
    assert samples and all(s["reward"]["reason"].startswith("BFCL: ") for s in samples)
    print(f"examples/bfcl.yaml, 2 steps: {seconds:.1f} s")

    from beyondagent_core.cli import main

    capsys.readouterr()
    out = tmp_path / "eval"
    assert main(["eval", str(EXAMPLE), *SMALL, "tasks.val.limit=3", "--checkpoint", str(result.run_dir), "--k", "2",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "multi_turn_base" in printed and "simple_python" in printed
    groups = json.loads((out / "eval.json").read_text())["by_group"]
    assert set(groups) == {"multi_turn_base", "simple_python"}

    venv = bfcl_venv
    scored = subprocess.run([str(venv.python), "-m", "beyondagent_plugin_bfcl.agreement", "--episodes",
                             str(out / "episodes.jsonl")], env=venv.environ(), capture_output=True, text=True,
                            check=True)
    theirs = json.loads(scored.stdout.strip().splitlines()[-1])
    for category, numbers in theirs.items():
        assert numbers["agree"] == numbers["episodes"], (category, numbers)
        assert groups[category]["pass@1"] == pytest.approx(numbers["bfcl_accuracy"])
