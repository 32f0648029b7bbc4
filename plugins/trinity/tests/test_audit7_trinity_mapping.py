"""Spec keys that reach trinity's config through mapping.py (audit 7), each checked with a value of its own.

The example spec leaves these keys at values that hide a wrong mapping (val_temperature equal to
temperature, no clip-higher, alpha and rank unset, two GPUs on one node), so each case sets values that
differ from whatever a wrong source would give: clip_ratio_high 0.28 against clip_ratio 0.2 (the upper
clip only), LoRA alpha 16 against rank 4, validation at temperature 0.0 while training samples at 0.7,
and trinity's `colocate` mode only where the whole cluster is one GPU (nodes x gpus_per_node == 1);
validation on startup only when `eval_every` schedules validation at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_trinity_mapping import mapped, spec_of


def keys(tmp_path: Path, backend=None, algorithm=None, **sections) -> dict:
    return {o.key: o.value for o in mapped(spec_of(tmp_path, backend, algorithm, **sections), tmp_path)}


def test_clip_higher_reaches_only_trinitys_upper_clip(tmp_path: Path) -> None:
    args = keys(tmp_path, algorithm={"clip_ratio": 0.2, "clip_ratio_high": 0.28})["algorithm.policy_loss_fn_args"]
    assert (args["clip_range"], args["clip_range_low"], args["clip_range_high"]) == (0.2, 0.2, 0.28)
    args = keys(tmp_path, algorithm={"clip_ratio": 0.2})["algorithm.policy_loss_fn_args"]
    assert (args["clip_range_low"], args["clip_range_high"]) == (0.2, 0.2)


def test_lora_alpha_is_its_own_value_not_the_rank(tmp_path: Path) -> None:
    got = keys(tmp_path, model={"path": "tiny", "dtype": "float32", "lora": {"rank": 4, "alpha": 16}})
    [config] = got["model.lora_configs"]
    assert (config["lora_rank"], config["lora_alpha"]) == (4, 16)


def test_validation_samples_at_val_temperature_and_training_at_temperature(tmp_path: Path) -> None:
    got = keys(tmp_path, {"temperature": 0.7, "val_temperature": 0.0})
    assert got["buffer.explorer_input.tasksets"][0]["rollout_args"]["temperature"] == 0.7
    assert got["buffer.explorer_input.eval_tasksets"][0]["rollout_args"]["temperature"] == 0.0
    assert got["model.temperature"] == 0.7


@pytest.mark.parametrize(("nodes", "gpus", "mode"), [(1, 1, "colocate"), (2, 1, "both"), (1, 2, "both")])
def test_colocate_only_when_the_whole_cluster_is_one_gpu(tmp_path: Path, nodes: int, gpus: int, mode: str) -> None:
    got = keys(tmp_path, {"nodes": nodes, "gpus_per_node": gpus})
    assert (got["mode"], got["cluster.node_num"], got["cluster.gpu_per_node"]) == (mode, nodes, gpus)


def test_validation_on_startup_only_when_validation_is_scheduled(tmp_path: Path) -> None:
    assert keys(tmp_path, {"eval_every": 5})["explorer.eval_on_startup"] is True
    got = keys(tmp_path, {"eval_every": 0})
    assert got["explorer.eval_on_startup"] is False and got["explorer.eval_interval"] == 1 << 30
