"""BeyondAgent's Trinity-RFT backend (`trinity`): the same spec, trained by Trinity-RFT.

`backend: {name: trinity}` translates the spec into Trinity-RFT's own `Config` (validated by its
`check_and_update`), writes the mixed tasks as trinity tasksets, and runs `trinity run` in a venv
of its own (trinity-rft 0.6 needs transformers>=5.12.1 and verl 0.8; the verl backend's verl 0.9
pins <5.11). Inside trinity's explorer our Workflow (`trinity_workflow.py`, registered in trinity's
WORKFLOWS by trinity's plugin loader) runs the spec's workflow, env and judges and returns
Experiences with our exact tokens; our advantage estimators run as its ADVANTAGE_FN.

Nothing here imports trinity, torch or Ray in the main environment: the backend factory is a lazy
`"module:attr"` string, and everything that needs trinity runs as a child process in its venv.
"""

from __future__ import annotations

from beyondagent_core import BackendSpec, hookimpl
from beyondagent_core.records import CommandSpec, VenvSpec
from beyondagent_plugin_trinity.config import TrinityConfig

__all__ = ["TrinityConfig", "beyondagent_backends", "beyondagent_commands", "beyondagent_venvs"]


@hookimpl
def beyondagent_backends() -> list[BackendSpec]:
    return [
        BackendSpec(name="trinity", factory="beyondagent_plugin_trinity.backend:TrinityBackend",
                    config_cls=TrinityConfig,
                    summary="GRPO with Trinity-RFT (its own venv): explorer/trainer split, rollout ahead of training."),
    ]


@hookimpl
def beyondagent_venvs() -> list[VenvSpec]:
    return [VenvSpec(name="trinity", factory="beyondagent_plugin_trinity.venv:recipe",
                     summary="Trinity-RFT 0.6.0 with verl 0.8.0 (vLLM on a GPU machine; CPU torch, no vLLM, here).")]


@hookimpl
def beyondagent_commands() -> list[CommandSpec]:
    return [CommandSpec(name="trinity", factory="beyondagent_plugin_trinity.setup_command:add_trinity_command",
                        summary="trinity backend: `beyondagent trinity setup` builds and checks its venv.")]
