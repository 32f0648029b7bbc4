"""Training precision on the torch backend: float32 master weights, low-precision compute.

`model.param_dtype` is what the weights, their gradients and AdamW's state are kept in (float32
by default); `model.dtype` is the dtype the forward and backward passes compute in (`auto`:
bfloat16 on a GPU that supports it, else float32). When the two differ, every forward of the
policy runs under `torch.autocast` (the rollout's decode steps, the update's and the SFT warm-up's
forward passes, the KL reference), as accelerate's `bf16=True` and verl's FSDP mixed precision do:
the matmuls run in bf16 while the optimizer adds each update to float32 weights.

Why it matters: AdamW's step is about `lr` per weight (1e-6..2e-5 for a pretrained model), far
below the spacing of bfloat16 numbers around a typical weight (2^-8 of it, ~4e-3 relative), so a
model *stored* in bf16 rounds most updates away and silently does not learn. Pure low-precision
weights (`param_dtype: bfloat16`) are possible, when asked for, with a warning.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core.errors import SpecError

if TYPE_CHECKING:
    import torch

DTYPE_NAMES = ("auto", "float32", "bfloat16", "float16")
PARAM_DTYPE_NAMES = ("float32", "bfloat16", "float16")


def resolve_dtype(name: str, device: torch.device, *, where: str = "backend.dtype") -> torch.dtype:
    """`auto` (bfloat16 on a CUDA device that supports it, else float32), `float32`, `bfloat16`, `float16`."""
    import torch

    if name == "auto":
        bf16_ok = device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if bf16_ok else torch.float32
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in dtypes:
        raise SpecError(f"unknown dtype {name!r}; valid: {', '.join(DTYPE_NAMES)}", where=where)
    if name == "bfloat16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise SpecError("bfloat16 requested but this GPU does not support it", where=where,
                        hint="use dtype: float16 or float32 (or auto)")
    return dtypes[name]


@attrs.frozen
class Precision:
    """What the policy's weights are kept in (`params`) and what its passes compute in (`compute`)."""

    params: torch.dtype
    compute: torch.dtype

    @property
    def mixed(self) -> bool:
        """Compute in a lower precision than the weights: forwards run under autocast."""
        return self.compute != self.params

    def describe(self) -> str:
        name = str(self.params).removeprefix("torch.")
        if not self.mixed:
            return name
        return f"{name} weights, {str(self.compute).removeprefix('torch.')} compute"


def resolve_precision(dtype: str, param_dtype: str, device: torch.device, *, where: str = "spec") -> Precision:
    """The precision of `model.dtype` (compute) and `model.param_dtype` (weights) on `device`.

    The rules are the core's (`beyondagent_core.precision`, shared with verl and trinity): a
    low-precision `param_dtype` computes in that dtype, `auto` is bf16 on a GPU that has it. Float16
    compute over float32 weights is refused here: it needs loss scaling, which this backend does not
    do. `where` is the spec file, for error messages."""
    import torch

    from beyondagent_core import precision as named

    for key, value, valid in (("dtype", dtype, DTYPE_NAMES), ("param_dtype", param_dtype, PARAM_DTYPE_NAMES)):
        if value not in valid:
            raise SpecError(f"unknown model.{key} {value!r}; valid: {', '.join(valid)}", where=f"{where}, key model.{key}")
    bf16_gpu = device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    names = named.resolve(types.SimpleNamespace(dtype=dtype, param_dtype=param_dtype), gpu=bf16_gpu, where=where)
    params = resolve_dtype(names.params, device, where=f"{where}, key model.param_dtype")
    compute = resolve_dtype(names.compute, device, where=f"{where}, key model.dtype")
    if compute == torch.float16 and params == torch.float32:
        raise SpecError("float16 compute over float32 weights needs loss scaling, which the torch backend does "
                        "not do", where=f"{where}, key model.dtype",
                        hint="use model.dtype: bfloat16 (GPUs from Ampere on) or float32; model.param_dtype: "
                             "float16 trains pure float16 weights")
    named.warn_if_pure(names, backend="torch")
    return Precision(params, compute)


def compute_in(model: Any, dtype: torch.dtype) -> Any:
    """Make every forward of `model` run under autocast to `dtype` (its weights stay as they are).

    The forward is replaced on the instance, bound as a method, so `copy.deepcopy(model)` (the KL
    reference) gets a forward of its own copy, and a LoRA wrapper around `model` (peft calls the
    base model's `forward`) computes in `dtype` too. Gradient checkpointing's recomputation restores
    the autocast state of the forward it repeats."""
    import torch

    if getattr(model, "autocast_dtype", None) == dtype:
        return model
    plain = getattr(model, "plain_forward", None) or model.forward.__func__

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type=self.device.type, dtype=dtype):
            return plain(self, *args, **kwargs)

    model.plain_forward = plain
    model.autocast_dtype = dtype
    model.forward = types.MethodType(forward, model)
    return model


class RolloutWeights:
    """The weights the rollout samples with: the policy itself, or under mixed precision a copy of
    it stored in the compute dtype, refreshed after every optimizer step.

    Measured on an H100 with SmolLM2-135M (benchmarks/precision_rollout.py, 64 x 32 tokens): decoding
    under autocast ran at 0.55x the speed of bf16 weights (a cast before every matmul, and a decode
    step is bound by kernel launches), while refreshing a bf16 copy took 3 ms. So the rollout keeps
    its own copy: half the policy's float32 size more memory, no float32 copy on the way (each
    parameter is cast on its own), and `refresh` copies only the parameters the optimizer trains.
    """

    def __init__(self, model: Any, precision: Precision):
        import copy

        import torch

        self.policy = model
        if not precision.mixed:
            self.model = model
            self._pairs: list[tuple[Any, Any]] = []
            return
        # deepcopy takes each parameter from the memo: cast one by one, never a whole float32 copy
        memo = {id(p): torch.nn.Parameter(p.detach().to(precision.compute), requires_grad=False)
                for p in model.parameters()}
        rollout = copy.deepcopy(model, memo)
        for name in ("forward", "plain_forward", "autocast_dtype"):  # its own dtype: no autocast
            if name in vars(rollout):
                delattr(rollout, name)
        self.model = rollout.eval()
        self._pairs = [(target, source) for target, source in zip(rollout.parameters(), model.parameters())
                       if source.requires_grad]

    @property
    def copied(self) -> bool:
        return self.model is not self.policy

    def refresh(self) -> None:
        """Copy the trained weights into the rollout's (after an optimizer step)."""
        import torch

        with torch.no_grad():
            for target, source in self._pairs:
                target.copy_(source)

    def follow(self, optimizer: Any) -> Any:
        """Refresh after every `optimizer.step()` (inside the update's device turn, so an asynchronous
        rollout's next batch sees the new weights); returns the hook's handle."""
        return optimizer.register_step_post_hook(lambda *args: self.refresh()) if self.copied else None
