"""A real verl checkpoint written on CPU: verl's FSDPCheckpointManager over an FSDP2-wrapped tiny model.

Run in verl's venv by test_verl_checkpoint_eval.py:

    python verl_checkpoint_check.py RUN_DIR

What is verl's: the FSDP2 wrapping (`verl.utils.fsdp_utils.apply_fsdp2`, as verl's FSDP engine
does for `strategy: fsdp2`) and the checkpoint (`FSDPCheckpointManager.save_checkpoint`: the
rank's model/optimizer/extra shards, `fsdp_config.json`, `huggingface/` with config and
tokenizer), in `RUN_DIR/checkpoints/global_step_1/actor` with verl's tracker file next to it.
What is ours: a gloo process group of world size 1, the device mesh built on "cpu" with verl's
dimension name `fsdp` (verl's `create_device_mesh` asks its platform for the device, which falls
back to "cuda" on a machine without one), and one AdamW step on a random batch so the saved
weights differ from the base model's. torch's FSDP1 (verl's default `strategy: fsdp`) cannot
wrap a model on CPU at all ("FSDP needs a non-CPU accelerator device").

Writes RUN_DIR/reference_hf (the trained weights, cast to bfloat16 as verl's merger writes them,
saved by transformers) and prints one JSON line.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist


def main(run_dir: Path) -> dict:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=0, world_size=1)
    from beyondagent_plugin_torch.tiny import tiny_model_dir
    from omegaconf import OmegaConf
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
    from verl.utils.fsdp_utils import apply_fsdp2

    torch.manual_seed(0)
    base = tiny_model_dir()
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(base)
    mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))
    apply_fsdp2(model, {"mesh": mesh}, {})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.randint(0, tokenizer.vocab_size, (2, 32))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()

    contents = ["model", "optimizer", "extra"]
    manager = FSDPCheckpointManager(model=model, optimizer=optimizer, lr_scheduler=None, processing_class=tokenizer,
                                    checkpoint_config=OmegaConf.create({"save_contents": contents,
                                                                        "load_contents": contents}))
    actor = run_dir / "checkpoints" / "global_step_1" / "actor"
    started = time.perf_counter()
    manager.save_checkpoint(str(actor), global_step=1)
    saved_s = time.perf_counter() - started
    (run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")  # verl's trainer writes it

    full = {key: (value.full_tensor() if isinstance(value, DTensor) else value).detach().clone()
            for key, value in model.state_dict().items()}
    reference = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    reference.load_state_dict(full)
    reference.to(torch.bfloat16).save_pretrained(run_dir / "reference_hf")
    tokenizer.save_pretrained(run_dir / "reference_hf")
    base_model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    changed = sum(not torch.equal(base_model.state_dict()[k], full[k]) for k in full)
    dist.destroy_process_group()
    return {"actor": str(actor), "files": sorted(os.listdir(actor)), "save_s": round(saved_s, 3),
            "fsdp_config": json.loads((actor / "fsdp_config.json").read_text()), "tensors": len(full),
            "changed_by_training": changed}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
