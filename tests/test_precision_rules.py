"""The core's precision rules (`beyondagent_core.precision`), every branch by name, without torch.

`resolve` maps `model.dtype` / `model.param_dtype` to the weights' and the compute dtype: float32
weights compute in `dtype` (`auto`: bf16 on a GPU, float32 on a CPU); low-precision weights compute
in their own dtype (`auto` follows them) and any other compute dtype is refused at `model.dtype`.
The pure low-precision warning names the dtype and its spacing. `native_conflict` reads each of
verl's precision keys (the weights' `model_dtype`, the compute `mixed_precision.param_dtype` as a
dotted key or inside a block, the rollout's dtype) in every spelling verl takes, and returns the
first that contradicts the spec; `refuse_native_conflict` names the key and the spec key to set.
"""

from __future__ import annotations

import types

import pytest
from structlog.testing import capture_logs

from beyondagent_core.errors import SpecError
from beyondagent_core.precision import Precision, native_conflict, refuse_native_conflict, resolve, warn_if_pure

ROLLOUT = "actor_rollout_ref.rollout.dtype"
ACTOR = "actor_rollout_ref.actor.fsdp_config"


def model(dtype: str, param_dtype: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(dtype=dtype, param_dtype=param_dtype)


@pytest.mark.parametrize(("dtype", "param_dtype", "gpu", "params", "compute"), [
    ("auto", "float32", True, "float32", "bfloat16"),
    ("auto", "float32", False, "float32", "float32"),
    ("float32", "float32", True, "float32", "float32"),
    ("float16", "float32", False, "float32", "float16"),
    ("bfloat16", "float32", False, "float32", "bfloat16"),
    ("auto", "bfloat16", False, "bfloat16", "bfloat16"),
    ("auto", "float16", True, "float16", "float16"),
    ("float16", "float16", False, "float16", "float16"),
])
def test_each_pair_of_keys_resolves_to_its_weights_and_compute_dtype(dtype: str, param_dtype: str, gpu: bool,
                                                                    params: str, compute: str) -> None:
    got = resolve(model(dtype, param_dtype), gpu=gpu, where="spec.yaml")
    assert (got.params, got.compute) == (params, compute)
    assert got.pure is (params != "float32")


@pytest.mark.parametrize(("dtype", "param_dtype"), [("float32", "bfloat16"), ("float16", "bfloat16"),
                                                    ("bfloat16", "float16")])
def test_low_precision_weights_computing_in_another_dtype_are_refused(dtype: str, param_dtype: str) -> None:
    with pytest.raises(SpecError) as caught:
        resolve(model(dtype, param_dtype), gpu=True, where="spec.yaml")
    assert caught.value.where == "spec.yaml, key model.dtype"
    assert f"model.dtype {dtype}" in caught.value.message and f"{param_dtype} weights" in caught.value.message
    assert f"set model.dtype: {param_dtype} (or auto)" in caught.value.hint


@pytest.mark.parametrize(("params", "spacing"), [("bfloat16", "4e-3"), ("float16", "5e-4")])
def test_pure_low_precision_warns_with_its_dtype_and_spacing(params: str, spacing: str) -> None:
    with capture_logs() as logs:
        warn_if_pure(Precision(params, params), backend="verl")
        warn_if_pure(Precision("float32", "bfloat16"), backend="verl")  # mixed precision: no warning
    (warning,) = [entry for entry in logs if entry["event"] == "train.pure_low_precision"]
    assert warning["log_level"] == "warning" and warning["backend"] == "verl"
    assert f"model.param_dtype {params}" in warning["message"] and f"about {spacing} of it" in warning["message"]


MIXED = Precision("float32", "bfloat16")


@pytest.mark.parametrize(("block", "conflict"), [
    ({f"{ACTOR}.model_dtype": "fp32"}, None),
    ({f"{ACTOR}.model_dtype": "32"}, None),
    ({f"{ACTOR}.model_dtype": "float32"}, None),
    ({f"{ACTOR}.model_dtype": "bf16"}, (f"{ACTOR}.model_dtype", "float32")),
    ({f"+{ACTOR}.mixed_precision.param_dtype": "bfloat16"}, None),
    ({f"+{ACTOR}.mixed_precision.param_dtype": "16"}, (f"+{ACTOR}.mixed_precision.param_dtype", "bfloat16")),
    ({f"{ACTOR}.mixed_precision": {"param_dtype": "bf16"}}, None),
    ({f"{ACTOR}.mixed_precision": {"param_dtype": "fp32"}}, (f"{ACTOR}.mixed_precision", "bfloat16")),
    ({ROLLOUT: "bfloat16"}, None),
    ({ROLLOUT: "fp16"}, (ROLLOUT, "bfloat16")),
    ({ROLLOUT: "fp8"}, (ROLLOUT, "bfloat16")),  # a spelling verl does not take is no agreement
    ({"actor_rollout_ref.ref.fsdp_config.model_dtype": "bf16", "trainer.n_gpus_per_node": 8}, None),  # not trained
    # the first contradiction, in the block's order
    ({ROLLOUT: "fp32", f"{ACTOR}.model_dtype": "bf16"}, (ROLLOUT, "bfloat16")),
])
def test_native_precision_keys_are_read_in_every_spelling(block: dict, conflict: tuple | None) -> None:
    assert native_conflict(block, MIXED, rollout_dtype_key=ROLLOUT) == conflict


@pytest.mark.parametrize(("key", "ours"), [(f"{ACTOR}.model_dtype", "model.param_dtype"), (ROLLOUT, "model.dtype")])
def test_a_refused_native_key_names_itself_and_the_spec_key_to_set(key: str, ours: str) -> None:
    with pytest.raises(SpecError) as caught:
        refuse_native_conflict({f"+{key}": "fp16"}, MIXED, model("auto", "float32"), backend="verl",
                               rollout_dtype_key=ROLLOUT, where="spec.yaml", sets="FSDP's dtypes")
    error = caught.value
    assert error.where == f"spec.yaml, key backend.verl.{key}"
    assert error.message.startswith(f"backend.verl sets {key}, which model.dtype: auto and "
                                    "model.param_dtype: float32 map to")
    assert f"set {ours} instead" in error.hint
    refuse_native_conflict({key: "bf16" if key == ROLLOUT else "fp32"}, MIXED, model("auto", "float32"), backend="verl",
                           rollout_dtype_key=ROLLOUT, where="spec.yaml", sets="FSDP's dtypes")  # agrees: no error
