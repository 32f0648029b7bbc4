"""`backend.rollout_mode` on the verl backend: one_step_off and async become verl 0.9.1's V1
`colocate_async` trainer with its staleness bound and token-level TIS; what cannot go with it is
refused with the reason (docs/spec.md, "Asynchronous rollout"). The dry run composes and validates
the mapped config with verl's own Hydra config in its venv, as `test_compose.py` does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from beyondagent_plugin_verl.mapping import OUR_TRAINER
from test_mapping import mapped, spec_of

from beyondagent_core.errors import SpecError
from beyondagent_core.pipeline import prepare
from beyondagent_core.plugins import PluginManager, Switches

ROOT = Path(__file__).resolve().parents[3]


def test_sync_sets_no_async_key(tmp_path: Path) -> None:
    got = mapped(spec_of(tmp_path), tmp_path)
    assert got["trainer.v1.trainer_mode"] == OUR_TRAINER  # verl's sync trainer, with failure-aware advantages
    assert not any(key.startswith("algorithm.rollout_correction") for key in got)


@pytest.mark.parametrize(("backend", "warmup", "threshold"), [
    ({"rollout_mode": "one_step_off"}, 1, 2),
    ({"rollout_mode": "async", "max_staleness": 3, "tis_cap": 5.0}, 3, 4),
])
def test_lagging_modes_map_to_colocate_async(tmp_path: Path, backend: dict[str, Any], warmup: int,
                                             threshold: int) -> None:
    got = mapped(spec_of(tmp_path, backend=backend), tmp_path)
    assert got["trainer.v1.trainer_mode"] == "colocate_async"
    assert got["trainer.v1.colocate_async.num_warmup_batches"] == warmup
    # verl counts the version a prompt started in too: a sample one version behind spans 2
    assert got["trainer.v1.sampler.max_off_policy_threshold"] == threshold
    assert got["trainer.v1.sampler.max_off_policy_strategy"] == "drop"
    assert got["algorithm.rollout_correction.rollout_is"] == "token"
    assert got["algorithm.rollout_correction.rollout_is_threshold"] == backend.get("tis_cap", 2.0)


def spec_with_block(tmp_path: Path, backend: dict[str, Any], **blocks: Any) -> Any:
    spec_of(tmp_path, backend=backend)
    data = yaml.safe_load((tmp_path / "spec.yaml").read_text())
    data.update(blocks)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    return prepare(tmp_path / "spec.yaml", manager=PluginManager(Switches(autoload=True))).spec


@pytest.mark.parametrize(("backend", "blocks", "key", "words"), [
    ({"rollout_mode": "one_step_off", "max_staleness": 2}, {}, "backend.max_staleness",
     ["lags one policy version", "rollout_mode: async"]),
    ({"rollout_mode": "async", "advantage": {"name": "gigpo"}}, {}, "backend.rollout_mode",
     ["colocate_async", "'gigpo'", "beyondagent_sync"]),
    ({"rollout_mode": "async"}, {"experience": {"name": "experience"}}, "backend.rollout_mode",
     ["experience-guided rollouts", "synchronous trainer"]),
    ({"rollout_mode": "one_step_off", "verl": {"trainer.v1.trainer_mode": "separate_async"}}, {},
     "backend.verl.trainer.v1.trainer_mode", ["colocate_async", "separate_async"]),
])
def test_what_cannot_go_with_it_is_refused_with_the_reason(tmp_path: Path, backend: dict[str, Any],
                                                           blocks: dict[str, Any], key: str,
                                                           words: list[str]) -> None:
    spec = spec_with_block(tmp_path, backend, **blocks)
    with pytest.raises(SpecError) as caught:
        mapped(spec, tmp_path)
    assert caught.value.where.endswith(f"key {key}"), caught.value.where
    text = f"{caught.value.message} {caught.value.hint}"
    for word in words:
        assert word in text, text


@pytest.mark.parametrize(("key", "value"), [("rollout_mode", "fully"), ("max_staleness", 0), ("tis_cap", 0)])
def test_bad_values_name_their_key(tmp_path: Path, key: str, value: Any) -> None:
    with pytest.raises(SpecError) as caught:
        spec_of(tmp_path, backend={key: value})
    assert "backend" in caught.value.where and key in str(caught.value), caught.value


def test_dry_run_composes_one_step_off_with_verl(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = "runs"
    data["backend"].update(rollout_mode="one_step_off", tis_cap=3.0)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(spec), "--dry-run"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    config = yaml.safe_load((tmp_path / "runs" / "verl_frozenlake" / "verl" / "verl_config.yaml").read_text())
    v1 = config["trainer"]["v1"]
    assert v1["trainer_mode"] == "colocate_async" and v1["colocate_async"]["num_warmup_batches"] == 1
    assert v1["sampler"]["max_off_policy_threshold"] == 2
    correction = config["algorithm"]["rollout_correction"]
    assert (correction["rollout_is"], correction["rollout_is_threshold"]) == ("token", 3.0)
