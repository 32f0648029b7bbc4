"""DAPO's and GSPO's `algorithm` options on the verl backend: clip-higher and `policy_loss` become
verl's own keys; `overlong` and `dynamic_sampling` are refused with the reason (docs/spec.md,
"GRPO options"). The mapping tests run in the main venv; the dry run composes and validates the
mapped config with verl's own Hydra config in its venv, as `test_compose.py` does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from beyondagent_plugin_verl.mapping import OFF_POLICY_LOSS
from test_mapping import mapped, spec_of

from beyondagent_core.errors import SpecError
from beyondagent_core.pipeline import prepare
from beyondagent_core.plugins import PluginManager, Switches

ROOT = Path(__file__).resolve().parents[3]
ACTOR = "actor_rollout_ref.actor"


def test_clip_ratio_sets_both_of_verls_bounds(tmp_path: Path) -> None:
    # verl's own clip_ratio_low/high default to 0.2 and win over clip_ratio: both are always set
    got = mapped(spec_of(tmp_path, algorithm={"clip_ratio": 0.25}), tmp_path)
    assert (got[f"{ACTOR}.clip_ratio"], got[f"{ACTOR}.clip_ratio_low"], got[f"{ACTOR}.clip_ratio_high"]) == (
        0.25, 0.25, 0.25)
    assert f"{ACTOR}.policy_loss.loss_mode" not in got  # vanilla: verl's default


def test_clip_higher_and_gspo_reach_verls_keys(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, algorithm={"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "policy_loss": "gspo",
                                        "loss_agg_mode": "seq-mean-token-mean"})
    got = mapped(spec, tmp_path)
    assert got[f"{ACTOR}.clip_ratio_low"] == 0.2 and got[f"{ACTOR}.clip_ratio_high"] == 0.28
    assert got[f"{ACTOR}.policy_loss.loss_mode"] == "gspo"
    assert got[f"{ACTOR}.loss_agg_mode"] == "seq-mean-token-mean"


@pytest.mark.parametrize(("algorithm", "key", "words"), [
    ({"policy_loss": "gpg"}, "algorithm.policy_loss", ["unknown algorithm.policy_loss 'gpg'", "vanilla, gspo"]),
    ({"overlong": {"buffer_len": 64}}, "algorithm.overlong",
     ["dapo` reward manager", "never runs", "use the torch backend"]),
    ({"dynamic_sampling": True}, "algorithm.dynamic_sampling",
     ["algorithm.filter_groups", "max_num_gen_batches", "backend.verl.algorithm.filter_groups"]),
    ({"sft": {"data": "successful"}}, "algorithm.sft", ["no warm-up", "fsdp_sft_trainer", "beyondagent sft SPEC"]),
])
def test_options_verl_cannot_honour_are_refused_with_the_reason(tmp_path: Path, algorithm: dict[str, Any], key: str,
                                                                words: list[str]) -> None:
    spec = spec_of(tmp_path, algorithm=algorithm)
    with pytest.raises(SpecError) as caught:
        mapped(spec, tmp_path)
    assert caught.value.where.endswith(f"key {key}")
    text = f"{caught.value.message} {caught.value.hint}"
    for word in words:
        assert word in text, text


def test_gspo_with_experience_is_refused(tmp_path: Path) -> None:
    spec_of(tmp_path, algorithm={"policy_loss": "gspo"})
    data = yaml.safe_load((tmp_path / "spec.yaml").read_text())
    data["experience"] = {"name": "experience"}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(data))
    spec = prepare(tmp_path / "spec.yaml", manager=PluginManager(Switches(autoload=True))).spec
    with pytest.raises(SpecError, match=rf"our own loss mode \(`{OFF_POLICY_LOSS}`") as caught:
        mapped(spec, tmp_path)
    assert caught.value.where.endswith("key algorithm.policy_loss")


def test_dry_run_composes_clip_higher_and_gspo_with_verl(verl_venv: Any, tiny_model: str, tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "examples" / "verl_frozenlake.yaml").read_text())
    data["run"]["output_dir"] = "runs"
    data["algorithm"].update(clip_ratio_low=0.2, clip_ratio_high=0.28, policy_loss="gspo")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data))
    proc = subprocess.run([sys.executable, "-m", "beyondagent_core.cli", "run", str(spec), "--dry-run"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    config = yaml.safe_load((tmp_path / "runs" / "verl_frozenlake" / "verl" / "verl_config.yaml").read_text())
    actor = config["actor_rollout_ref"]["actor"]
    assert (actor["clip_ratio_low"], actor["clip_ratio_high"], actor["policy_loss"]["loss_mode"]) == (0.2, 0.28, "gspo")
