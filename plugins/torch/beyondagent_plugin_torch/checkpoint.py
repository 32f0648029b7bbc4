"""Checkpoints: atomic, resumable, and loadable as a model.

`checkpoints/step_000010/` holds `model/` (a Hugging Face checkpoint: `model.path` can point
at it), `optimizer.pt` (optimizer and LR-scheduler state, RNG states) and `state.json` (the
step to continue from and the spec it was trained with). A checkpoint is written to a
temporary directory and renamed into place, so a run killed while saving leaves the previous
checkpoint intact (every file is fsynced before the rename). `--resume` refuses a checkpoint
whose spec differs in keys that matter, naming them, and falls back to the previous checkpoint
when the newest one cannot be loaded (a damaged file).
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import torch

from beyondagent_core.errors import RunError

CHECKPOINTS_DIR = "checkpoints"
# Spec keys that may differ on resume (logging and how long/how often, not what is learned; gradient
# checkpointing recomputes the same values).
VOLATILE_PREFIXES = ("logging", "run.output_dir", "plugins", "model.gradient_checkpointing")


@attrs.define
class Checkpoint:
    path: Path
    step: int
    spec: dict[str, Any]


def save_checkpoint(run_dir: Path, step: int, *, model: Any, tokenizer: Any, optimizer: Any, scheduler: Any,
                    spec: dict[str, Any], keep: int, extra: Callable[[Path], None] | None = None) -> Path:
    """Write the state after `step` steps; keeps the newest `keep` checkpoints. `extra(directory)`
    writes more into the checkpoint before it is made final (the critic)."""
    root = run_dir / CHECKPOINTS_DIR
    final = root / f"step_{step:06d}"
    staging = root / f".staging-step_{step:06d}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    model.save_pretrained(staging / "model")
    tokenizer.save_pretrained(staging / "model")
    torch.save({
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "torch_rng": torch.get_rng_state(),
        # on a GPU its generators too: LoRA's dropout (and any op drawing from the default CUDA generator)
        # must draw after a resume what it would have drawn without the interruption
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "python_rng": random.getstate(),
    }, staging / "optimizer.pt")
    (staging / "state.json").write_text(json.dumps({"step": step, "spec": spec}, indent=2, default=str) + "\n")
    if extra is not None:
        extra(staging)
    _fsync_tree(staging)  # on disk before the rename makes it the checkpoint a resume trusts
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    _fsync(root)
    for old in sorted(root.glob("step_*"))[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        _fsync(path)
    _fsync(root)


def latest_checkpoint(run_dir: Path) -> Checkpoint | None:
    return next(iter(checkpoints(run_dir)), None)


def checkpoints(run_dir: Path) -> list[Checkpoint]:
    """The complete checkpoints, newest first (one whose state.json cannot be read is left out)."""
    found = []
    for path in sorted((run_dir / CHECKPOINTS_DIR).glob("step_*"), reverse=True):
        state = path / "state.json"
        if state.is_file() and (path / "optimizer.pt").is_file():
            try:
                data = json.loads(state.read_text())
                found.append(Checkpoint(path=path, step=int(data["step"]), spec=data["spec"]))
            except (ValueError, KeyError, TypeError, OSError):
                continue
    return found


def load_training_state(checkpoint: Checkpoint, *, optimizer: Any, scheduler: Any) -> None:
    state = torch.load(checkpoint.path / "optimizer.pt", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["torch_rng"])
    cuda_rng = state.get("cuda_rng")  # None: saved without a GPU (or before it was saved)
    if cuda_rng is not None and torch.cuda.is_available() and len(cuda_rng) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda_rng)
    random.setstate(state["python_rng"])


def check_resumable(checkpoint: Checkpoint, spec: dict[str, Any], *, backend_volatile: tuple[str, ...],
                    spec_path: str, backend_defaults: dict[str, Any] | None = None) -> None:
    """Refuse to resume when the spec changed in a way that matters; the error lists the keys.
    `backend_defaults`: the backend block's defaults (a key newer than the checkpoint is no
    difference while it keeps its default)."""
    volatile = (*VOLATILE_PREFIXES, *(f"backend.{key}" for key in backend_volatile))
    defaults = {**core_defaults(), **({"backend": backend_defaults} if backend_defaults else {})}
    differences = [key for key in spec_differences(checkpoint.spec, spec, defaults=defaults)
                   if not any(key == v or key.startswith(v + ".") for v in volatile)]
    if differences:
        shown = ", ".join(differences[:12]) + (" ..." if len(differences) > 12 else "")
        raise RunError(f"cannot resume: the spec differs from the checkpoint's in {shown}",
                       where=f"{spec_path} vs {checkpoint.path}/state.json",
                       hint="restore those keys, or start a new run (another run.name) without --resume")


_ABSENT = object()


def core_defaults() -> dict[str, Any]:
    """The core sections' defaults (`model`, `algorithm`, ...) as a resolved spec holds them."""
    import attrs

    from beyondagent_core.spec import CORE_SECTIONS

    return {section: attrs.asdict(cls()) for section, cls in CORE_SECTIONS.items()}


def spec_differences(old: Any, new: Any, prefix: str = "", *, defaults: Any = None) -> list[str]:
    """Dotted key paths whose values differ between two nested dicts.

    A key the old spec lacks (a checkpoint written before the key existed) is no difference when
    the new spec leaves it at its default: the core section's default in `defaults`, or null/false."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(set(old) | set(new))
        return [diff for key in keys
                for diff in spec_differences(old.get(key, _ABSENT), new.get(key), f"{prefix}.{key}" if prefix else str(key),
                                             defaults=defaults.get(key, _ABSENT) if isinstance(defaults, dict) else _ABSENT)]
    if old is _ABSENT:
        return [] if new is None or new is False or (defaults is not _ABSENT and new == defaults) else [prefix or "(root)"]
    return [] if old == new else [prefix or "(root)"]
