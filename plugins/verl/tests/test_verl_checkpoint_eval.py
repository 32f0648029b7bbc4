"""`beyondagent eval --checkpoint` on a real verl checkpoint: found, merged once by verl's merger, evaluated.

`verl_checkpoint_check.py` writes the checkpoint in verl's venv with verl's own FSDP checkpoint
manager (FSDP2 on CPU, see its docstring) and the same trained weights as a plain HF directory
(`reference_hf`). Here: every path that names the checkpoint resolves to one merged directory;
the first resolution runs `python -m verl.model_merger merge --backend fsdp` in verl's venv and
says so, with the time it took; the second merges nothing; the merged weights are the trained
ones; and `beyondagent eval` of the verl spec on the verl checkpoint gives, greedily, exactly the
episodes and numbers it gives on the reference directory. Bad checkpoints are clear errors.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from beyondagent_core.errors import RunError
from beyondagent_plugin_report.eval.evaluation import EvalError, resolve_checkpoint
from beyondagent_core.plugins import PluginManager, Switches
from beyondagent_core.registry import Registry

HERE = Path(__file__).resolve().parent


def resolve(path: Path, **options: Any) -> Path:
    """`resolve_checkpoint` as `beyondagent eval` calls it: the installed backends claim their formats."""
    registry = Registry(PluginManager(Switches.from_environment()).load())
    return resolve_checkpoint(path, registry=registry, **options)


ROOT = HERE.parents[2]


@pytest.fixture(scope="module")
def verl_run(verl_venv: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run_dir = tmp_path_factory.mktemp("verl_ckpt") / "run"
    started = time.monotonic()
    result = verl_venv.run([str(HERE / "verl_checkpoint_check.py"), str(run_dir)], timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    written = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"verl checkpoint written on CPU in {time.monotonic() - started:.1f} s (save_checkpoint "
          f"{written['save_s']} s): {written['files']}")
    return {"run_dir": run_dir, **written}


def test_a_verl_checkpoint_is_merged_once_and_holds_the_trained_weights(verl_run: dict[str, Any],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from safetensors.torch import load_file

    run_dir = verl_run["run_dir"]
    assert verl_run["fsdp_config"] == {"FSDP_version": 2, "world_size": 1}
    assert {"model_world_size_1_rank_0.pt", "fsdp_config.json", "huggingface"} <= set(verl_run["files"])
    assert verl_run["changed_by_training"] == verl_run["tensors"]  # the saved weights are not the base model's
    step = run_dir / "checkpoints" / "global_step_1"
    target = step / "merged_hf"
    assert resolve(run_dir, merge=False) == target and not target.exists()  # a dry run merges nothing

    started = time.monotonic()
    assert resolve(run_dir) == target
    merge_s = time.monotonic() - started
    said = capsys.readouterr().err
    assert "merging its FSDP shards into an HF model at" in said and "verl checkpoint merged in" in said
    record = json.loads((target / "merge.json").read_text())
    with capsys.disabled():
        print(f"\nmerge (verl's model merger in verl's venv, tiny model): {merge_s:.1f} s, merger {record['seconds']} s")

    merged = load_file(target / "model.safetensors")
    reference = load_file(run_dir / "reference_hf" / "model.safetensors")
    assert merged.keys() == reference.keys()
    for key, tensor in reference.items():
        assert merged[key].dtype == tensor.dtype and merged[key].equal(tensor), key

    started = time.monotonic()
    for path in (run_dir, run_dir / "checkpoints", step, step / "actor", step / "actor" / "huggingface"):
        assert resolve(path) == target
    assert time.monotonic() - started < 5  # found, not merged again
    assert "using its merged model" in capsys.readouterr().err
    assert json.loads((target / "merge.json").read_text()) == record


def run_eval(checkpoint: Path, out: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "beyondagent_core.cli", "eval", str(ROOT / "examples" / "verl_frozenlake.yaml"),
               f"run.output_dir={out.parent}", "--checkpoint", str(checkpoint), "--k", "2", "--limit", "3",
               "--temperature", "0", "--out", str(out), "--concurrency", "4"]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    print(f"eval of {checkpoint.name}: {time.monotonic() - started:.1f} s")
    return json.loads((out / "eval.json").read_text())


def test_eval_of_the_verl_checkpoint_equals_eval_of_its_weights(verl_run: dict[str, Any], tmp_path: Path) -> None:
    """The verl spec's backend serves the merged model (`VerlBackend.eval_llm`): greedy episodes are
    the ones the same weights give as a plain HF directory."""
    run_dir = verl_run["run_dir"]
    ours = run_eval(run_dir, tmp_path / "verl")
    reference = run_eval(run_dir / "reference_hf", tmp_path / "reference")
    assert ours["model"].endswith("global_step_1/merged_hf")
    assert ours["summary"] == reference["summary"] and ours["tasks"] == reference["tasks"]

    def turns(out: Path) -> list[Any]:
        lines = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
        return sorted((r["sample"]["task_id"], r["sample"]["index"],
                       [t["content"] for t in r["trajectory"]["turns"] if t["role"] == "assistant"]) for r in lines)

    assert turns(tmp_path / "verl") == turns(tmp_path / "reference")
    assert len(turns(tmp_path / "verl")) == 6


def test_a_damaged_verl_checkpoint_is_a_clear_error(verl_run: dict[str, Any], tmp_path: Path) -> None:
    actor = verl_run["run_dir"] / "checkpoints" / "global_step_1" / "actor"
    empty = tmp_path / "no_shards" / "global_step_3" / "actor"
    shutil.copytree(actor, empty)
    (empty / "model_world_size_1_rank_0.pt").unlink()
    with pytest.raises(EvalError, match="holds no model shards"):
        resolve(empty.parent)
    torn = tmp_path / "torn" / "global_step_4" / "actor"
    shutil.copytree(actor, torn)
    (torn / "model_world_size_1_rank_0.pt").write_bytes(b"not a torch file")
    with pytest.raises(RunError, match="verl's model merger failed on") as caught:
        resolve(torn.parent)
    assert "python -m verl.model_merger merge" not in caught.value.message and "verl.model_merger" in caught.value.hint
    assert not (torn.parent / "merged_hf").exists() and not (torn.parent / ".merged_hf.partial").exists()
