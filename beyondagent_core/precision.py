"""`model.dtype` and `model.param_dtype` by name, for the backends that hand them to another
framework's trainer (verl's FSDP, Trinity-RFT's verl trainer): resolved without torch, refused
where they contradict each other, and the pure low-precision warning said as the torch backend
says it.

`param_dtype` is what the weights, their gradients and the optimizer state are kept in (float32:
mixed precision); `dtype` is what the forward and backward passes compute in. `auto` is bfloat16
on a GPU (verl's and vLLM's own default: the trainer's GPUs cannot be asked from where the
mapping runs; a GPU without bf16 needs `model.dtype: float16`) and float32 on CPU. A low-precision
`param_dtype` computes in that same dtype (`auto` follows it); another compute dtype is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from beyondagent_core.errors import SpecError
from beyondagent_core.logs import get_logger

log = get_logger("beyondagent.precision")

FLOAT32, BFLOAT16, FLOAT16 = "float32", "bfloat16", "float16"
SHORT = {FLOAT32: "fp32", BFLOAT16: "bf16", FLOAT16: "fp16"}  # verl's PrecisionType names (FSDP configs)
# every spelling verl's PrecisionType.to_dtype takes, for reading a user's native key
ALIASES = {"fp32": FLOAT32, "float32": FLOAT32, "32": FLOAT32, "bf16": BFLOAT16, "bfloat16": BFLOAT16,
           "fp16": FLOAT16, "float16": FLOAT16, "16": FLOAT16}
SPACING = {BFLOAT16: "4e-3", FLOAT16: "5e-4"}  # relative spacing of the numbers around a weight
PURE_LOW_PRECISION_WARNING = (
    "model.param_dtype {dtype}: the weights and AdamW's state are kept in {dtype}; an update smaller than "
    "the spacing of {dtype} numbers around a weight (about {spacing} of it) is rounded away, so a small "
    "learning rate may silently not learn. Leave model.param_dtype at float32 (mixed precision) unless "
    "memory forces this.")


@attrs.frozen
class Precision:
    """What the trained weights are kept in (`params`) and what the passes compute in (`compute`)."""

    params: str
    compute: str

    @property
    def pure(self) -> bool:
        """Low-precision weights and optimizer state: small updates are rounded away."""
        return self.params != FLOAT32


def resolve(model: Any, *, gpu: bool, where: str) -> Precision:
    """`model.dtype` / `model.param_dtype` of the spec's `model` section as dtype names (see the module)."""
    dtype, param_dtype = model.dtype, model.param_dtype
    if param_dtype != FLOAT32:
        compute = param_dtype if dtype == "auto" else dtype
        if compute != param_dtype:
            raise SpecError(f"model.dtype {dtype} computes in another dtype than the {param_dtype} weights of "
                            "model.param_dtype", where=f"{where}, key model.dtype",
                            hint=f"set model.dtype: {param_dtype} (or auto), or model.param_dtype: float32 for "
                                 "mixed precision")
        return Precision(param_dtype, compute)
    if dtype == "auto":
        return Precision(FLOAT32, BFLOAT16 if gpu else FLOAT32)
    return Precision(FLOAT32, dtype)


def warn_if_pure(precision: Precision, *, backend: str) -> None:
    """The torch backend's warning, when the weights are kept in a low precision."""
    if precision.pure:
        log.warning("train.pure_low_precision", backend=backend, message=PURE_LOW_PRECISION_WARNING.format(
            dtype=precision.params, spacing=SPACING[precision.params]))


def native_conflict(block: Mapping[str, Any], precision: Precision, *,
                    rollout_dtype_key: str) -> tuple[str, str] | None:
    """The first key of a flattened native block (`flatten(backend.verl)`) that sets the actor's
    master-weight dtype, its FSDP compute dtype or the rollout's dtype to something other than
    `precision`, with what it should be; None when there is none. verl's FSDP keys:
    `...actor.fsdp_config.model_dtype` (weights), `...actor.fsdp_config.mixed_precision` (its
    `param_dtype` is the compute dtype)."""
    for raw, value in block.items():
        key = raw.lstrip("+")
        if key.endswith("actor.fsdp_config.model_dtype"):
            got, want = value, precision.params
        elif key.endswith("actor.fsdp_config.mixed_precision.param_dtype"):
            got, want = value, precision.compute
        elif key.endswith("actor.fsdp_config.mixed_precision") and isinstance(value, Mapping):
            got, want = value.get("param_dtype", "bf16"), precision.compute  # verl's default when unset
        elif key == rollout_dtype_key:
            got, want = value, precision.compute
        else:
            continue
        if ALIASES.get(str(got)) != want:
            return raw, want
    return None


def refuse_native_conflict(block: Mapping[str, Any], precision: Precision, model: Any, *, backend: str,
                           rollout_dtype_key: str, where: str, sets: str) -> None:
    """A SpecError when `backend.<backend>` (`block`, flattened) sets a precision key against the spec's
    (`native_conflict`); `sets` says what those keys set in that backend, for the message."""
    conflict = native_conflict(block, precision, rollout_dtype_key=rollout_dtype_key)
    if conflict is None:
        return
    key, want = conflict
    ours = "model.param_dtype" if key.endswith("model_dtype") else "model.dtype"
    raise SpecError(f"backend.{backend} sets {key.lstrip('+')}, which model.dtype: {model.dtype} and "
                    f"model.param_dtype: {model.param_dtype} map to {want} ({sets} are set from them)",
                    where=f"{where}, key backend.{backend}.{key.lstrip('+')}",
                    hint=f"remove that key and set {ours} instead (a bfloat16 model.param_dtype trains pure "
                         "bf16 weights, with a warning)")
