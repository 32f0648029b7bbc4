"""LoRA (`model.lora`): only low-rank adapters train, through `peft`; checkpoints hold only them.

- `with_adapters(model, lora)`: the policy with fresh adapters on `target_modules` (every other
  weight frozen). The optimizer then sees the adapters' parameters only.
- `BaseWeights(model)`: the KL reference without a second copy of the model: the same module
  with its adapters switched off for the forward pass (the starting policy, since LoRA's `B`
  starts at zero).
- `load_adapters(model, directory)`: the adapters of a checkpoint on the base model, trainable
  again (`--resume`).
- `merged_model(checkpoint)`: the checkpoint's adapters merged into its base weights, written
  once next to them (`<step>/merged`): what `beyondagent eval` and any other tool loads.

peft and torch are imported inside the functions: the CLI imports this plugin at start-up.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from beyondagent_core.errors import RunError, SpecError

ADAPTER_CONFIG = "adapter_config.json"
MERGED_DIR = "merged"


def with_adapters(model: Any, lora: Any, *, seed: int, where: str = "model.lora", task_type: str = "CAUSAL_LM") -> Any:
    """`model` wrapped with LoRA adapters as `lora` (a `LoraSection`) describes them, their random
    initial weights drawn from `seed` (the run's), not from whatever the global generator holds.
    `task_type` TOKEN_CLS (the critic): peft trains the value head in full besides the adapters."""
    import torch
    from peft import LoraConfig, get_peft_model

    targets: Any = list(lora.target_modules)
    if targets == ["all-linear"]:
        # peft's all-linear leaves out a causal LM's output head; a critic's value head (trained in
        # full, as peft's TOKEN_CLS does with `score`) must be left out by name
        targets = "all-linear" if task_type == "CAUSAL_LM" else sorted(
            {name.rsplit(".", 1)[-1] for name, module in model.named_modules()
             if isinstance(module, torch.nn.Linear) and not name.startswith("score")})
    config = LoraConfig(r=int(lora.rank), lora_alpha=float(lora.alpha), lora_dropout=float(lora.dropout),
                        target_modules=targets, bias="none", task_type=task_type)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            wrapped = get_peft_model(model, config)
    except ValueError as exc:  # peft names the modules it could not find
        names = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                        if type(module).__name__ == "Linear"})
        raise SpecError(f"LoRA could not adapt this model: {exc}", where=f"{where}.target_modules",
                        hint=f"name some of the model's linear layers ({', '.join(names[:12])}) or use all-linear"
                        ) from None
    return wrapped


class BaseWeights:
    """The policy's base weights as a model of its own: the adapters are off during its forward."""

    def __init__(self, model: Any):
        self.model = model

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self.model.disable_adapter():
            return self.model(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


def is_adapter_dir(path: Path) -> bool:
    return (path / ADAPTER_CONFIG).is_file()


def load_adapters(model: Any, directory: Path) -> Any:
    """`model` (the base) with the adapters saved in `directory`, trainable."""
    from peft import PeftModel

    return PeftModel.from_pretrained(model, str(directory), is_trainable=True)


def trainable_parameters(model: Any) -> tuple[int, int]:
    """(trainable, all) parameter counts."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return trainable, sum(p.numel() for p in model.parameters())


def merged_model(step_dir: Path, *, say: Callable[[str], None] = lambda text: None) -> Path:
    """The HF model directory of a LoRA checkpoint `step_dir` (adapters in `step_dir/model`): its
    base model (the spec's `model.path`, from the checkpoint's state.json) with the adapters merged,
    written once to `step_dir/merged` and reused after."""
    merged = step_dir / MERGED_DIR
    if (merged / "config.json").is_file():
        return merged
    try:
        spec = json.loads((step_dir / "state.json").read_text())["spec"]
        base = spec["model"]["path"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RunError(f"the LoRA checkpoint {step_dir} does not name its base model: {exc}",
                       where=str(step_dir / "state.json"), hint="the checkpoint is damaged; use an earlier one") from None
    from beyondagent_plugin_torch.models import load_policy

    say(f"merging the LoRA adapters of {step_dir} into {base} (once; kept in {merged})")
    model, tokenizer = load_policy(base, tokenizer=str(step_dir / "model"), device="cpu", dtype="float32",
                                   where=f"{step_dir / 'state.json'}: model.path")
    model = load_adapters(model, step_dir / "model").merge_and_unload()
    staging = step_dir / f".{MERGED_DIR}-staging"
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    staging.rename(merged)
    return merged
