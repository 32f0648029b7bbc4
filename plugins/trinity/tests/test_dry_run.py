"""`beyondagent run --dry-run` with `backend: trinity`: the quickstart with only its backend block
changed, composed on Trinity-RFT's Config schema and validated by its `check_and_update` (in trinity's
venv); native keys trinity lacks, and values its validator refuses, as errors naming our key; and
`beyondagent trinity setup` on the cached venv.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
BACKEND = {"name": "trinity", "total_steps": 80, "batch_size": 4, "lr": 0.005, "warmup_steps": 2, "max_new_tokens": 2,
           "max_prompt_tokens": 256, "max_response_tokens": 256, "eval_every": 20, "val_temperature": 1.0,
           "save_every": 20}


def quickstart_on_trinity(tmp_path: Path) -> Path:
    data = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    data["backend"] = dict(BACKEND)  # the only change (and where the run directory goes)
    data["run"]["output_dir"] = str(tmp_path / "runs")
    path = tmp_path / "quickstart_trinity.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cli(*args: str) -> subprocess.CompletedProcess:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", *args], cwd=ROOT, capture_output=True,
                            text=True, timeout=600, check=False)
    print(f"beyondagent {args[0]} {' '.join(args[2:])}: {time.monotonic() - started:.1f} s")
    return result


def test_the_quickstart_composes_and_validates_as_a_trinity_config(trinity_venv: Any, tmp_path: Path) -> None:
    result = cli("run", str(quickstart_on_trinity(tmp_path)), "model.gradient_checkpointing=false", "--dry-run")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    out = " ".join(result.stdout.split())  # rich wraps long lines
    assert "Trinity-RFT config (composed by trinity-rft 0.6.0 and checked by its check_and_update" in out
    assert "mode both: 1 explorer + 1 trainer GPU(s) of the 2 the spec declares" in out
    assert "registered (beyondagent_plugin_trinity.trinity_workflow.BeyondAgentWorkflow" in out
    config = yaml.safe_load((tmp_path / "runs" / "quickstart" / "trinity" / "trinity_config.yaml").read_text())
    taskset = config["buffer"]["explorer_input"]["tasksets"][0]
    assert taskset["default_workflow_type"] == "beyondagent" and taskset["repeat_times"] == 8  # set by trinity
    assert config["buffer"]["train_batch_size"] == 32  # trinity's own derivation: batch_size x repeat_times
    assert config["cluster"]["trainer_gpu_num"] == 1 and config["explorer"]["rollout_model"]["enable_openai_api"]
    assert config["algorithm"]["entropy_loss_fn_args"] == {"entropy_coef": 0.01}
    # into trinity's free-form verl overrides (its build_verl_config merges them into the model config)
    verl = config["trainer"]["trainer_config"]["actor_rollout_ref"]
    assert verl["model"] == {"enable_gradient_checkpointing": False}
    # model.dtype auto / model.param_dtype float32: fp32 master weights, bf16 compute and rollout (issue 33)
    mixed = {"param_dtype": "bf16", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    for role in ("actor", "ref"):
        assert verl[role] == {"fsdp_config": {"model_dtype": "fp32", "mixed_precision": mixed}}, role
    assert config["explorer"]["rollout_model"]["dtype"] == "bfloat16"
    # ...as trinity's trainer builds verl's config from them, and verl's FSDP engine config reads them
    script = ("import sys; from trinity.common.config import load_config; "
              "from trinity.trainer.verl.config import build_verl_config; "
              "from verl.utils.config import omega_conf_to_dataclass as dc; "
              "v = build_verl_config(load_config(sys.argv[1])); e = dc(v.actor).engine; "
              "print(e.model_dtype, e.mixed_precision['param_dtype'], v.ref.fsdp_config.model_dtype)")
    built = trinity_venv.run(["-c", script, str(tmp_path / "runs" / "quickstart" / "trinity" / "trinity_config.yaml")],
                             timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    assert built.stdout.split()[-3:] == ["fp32", "bf16", "fp32"]


def test_native_keys_are_checked_by_trinity_and_errors_name_our_key(trinity_venv: Any, tmp_path: Path) -> None:
    spec = str(quickstart_on_trinity(tmp_path))
    unknown = cli("run", spec, "backend.trinity.trainer.param_offlaod=true", "--dry-run")
    assert unknown.returncode == 2, unknown.stderr[-3000:]
    assert "Trinity-RFT has no key 'trainer.param_offlaod'" in unknown.stderr
    assert "key backend.trinity.trainer.param_offlaod" in unknown.stderr
    assert "did you mean trainer.param_offload" in unknown.stderr
    refused = cli("run", spec, "backend.trinity.trainer.save_hf_checkpoint=sometimes", "--dry-run")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "Trinity-RFT's check_and_update rejected the config" in refused.stderr
    assert "Traceback" not in unknown.stderr + refused.stderr


def test_setup_says_what_the_venv_has(trinity_venv: Any) -> None:
    result = cli("trinity", "setup")
    assert result.returncode == 0, result.stderr[-3000:]
    err = " ".join(result.stderr.split())
    assert "trinity-rft 0.6.0, verl 0.8.0, torch 2.13.0" in err and "vLLM not installed" in err
    assert "GPUs: none" in err and "registered (by trinity's plugin loader" in err
    assert "built in" in err


def test_a_cpu_run_writes_the_tasksets_then_says_training_needs_gpus(trinity_venv: Any, tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "examples" / "trinity_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data["tasks"]["train"]["count"] = 8
    data["backend"].update({"total_steps": None, "epochs": 2, "batch_size": 2})
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    result = cli("run", str(spec))
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-3000:]
    err = " ".join(result.stderr.split())
    assert "Trinity-RFT needs 2 GPU(s) on this node (backend.gpus_per_node) but torch in trinity's venv sees 0" in err
    assert "Traceback" not in result.stderr
    trinity_dir = tmp_path / "runs" / "trinity_frozenlake" / "trinity"
    rows = [yaml.safe_load(line) for line in (trinity_dir / "data" / "train" / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 16 and [r["epoch"] for r in rows] == [0] * 8 + [1] * 8
    assert len((trinity_dir / "data" / "val" / "test.jsonl").read_text().splitlines()) == 16
    config = yaml.safe_load((trinity_dir / "trinity_config.yaml").read_text())
    assert config["buffer"]["explorer_input"]["tasksets"][0]["path"] == str(trinity_dir / "data" / "train")
    assert config["buffer"]["explorer_input"]["eval_tasksets"][0]["path"] == str(trinity_dir / "data" / "val")
    assert yaml.safe_load((trinity_dir / "spec.yaml").read_text())["backend"]["name"] == "trinity"
    record = yaml.safe_load((trinity_dir.parent / "reproduce.json").read_text())  # JSON is YAML
    assert (record["backend"], record["device"], record["precision"]["params"]) == ("trinity", "cuda", "float32")
