"""`native_conflict` reads verl's defaults for a `mixed_precision` block that leaves `param_dtype`
out (eighth mutation audit).

verl's FSDP `mixed_precision.param_dtype` (the compute dtype) defaults to bf16: a block that sets only
`reduce_dtype` computes in bf16, which contradicts a spec computing in float32 and agrees with one
computing in bfloat16.
"""

from __future__ import annotations

from beyondagent_core.precision import Precision, native_conflict

KEY = "actor_rollout_ref.actor.fsdp_config.mixed_precision"
ROLLOUT = "actor_rollout_ref.rollout.dtype"


def test_a_mixed_precision_block_without_param_dtype_computes_in_bf16() -> None:
    block = {f"+{KEY}": {"reduce_dtype": "fp32"}}
    assert native_conflict(block, Precision("float32", "float32"), rollout_dtype_key=ROLLOUT) == (f"+{KEY}", "float32")
    assert native_conflict(block, Precision("float32", "bfloat16"), rollout_dtype_key=ROLLOUT) is None


def test_a_mixed_precision_block_naming_param_dtype_is_read_as_written() -> None:
    block = {KEY: {"param_dtype": "fp32"}}
    assert native_conflict(block, Precision("float32", "float32"), rollout_dtype_key=ROLLOUT) is None
    assert native_conflict(block, Precision("float32", "bfloat16"), rollout_dtype_key=ROLLOUT) == (KEY, "bfloat16")
