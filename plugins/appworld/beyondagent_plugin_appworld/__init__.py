"""AppWorld for BeyondAgent: env, task source, workflow, judge, its venv and CLI.

Registers the env `appworld` (served out of process from the `appworld` venv, one worker
process per episode), the task source `appworld`, the workflow `appworld_react`, the judge
`appworld`, the venv `appworld` (appworld 0.1.3.post1 pins pydantic 1, so it never enters the
main environment) and the command `beyondagent appworld setup|check|generate`. Imports here
are light: factories are `"module:attr"` strings.
"""

from __future__ import annotations

from beyondagent_core import CommandSpec, EnvSpec, RewardSpec, TaskSourceSpec, VenvSpec, WorkflowSpec, hookimpl
from beyondagent_plugin_appworld.config import (
    AppWorldConfig,
    AppWorldJudgeConfig,
    AppWorldReactConfig,
    AppWorldTasksConfig,
)

__all__ = ["beyondagent_commands", "beyondagent_envs", "beyondagent_rewards", "beyondagent_task_sources",
           "beyondagent_venvs", "beyondagent_workflows"]

_PACKAGE = "beyondagent_plugin_appworld"
# One worker process per episode (AppWorld allows one open world per process), two started
# ahead. Bounds on the model's code (docs/appworld.md, 'Bounds'): AppWorld's own timeout
# (`code_timeout`, by signal in the worker's main thread) ends a cell that runs Python; the
# service's call timeout kills the worker of one that never checks for signals (`sum(range(10 ** 12))`);
# each worker's address space is capped (a worker uses ~0.45 GB), so a cell that asks for more
# gets a MemoryError instead of the machine's memory.
SERVE_ARGS = ("--instances", "process", "--process-warm", "2", "--call-timeout", "120",
              "--process-memory-mb", "4096")


@hookimpl
def beyondagent_venvs() -> list[VenvSpec]:
    return [VenvSpec(name="appworld", factory=f"{_PACKAGE}.venv:appworld_recipe",
                     summary="appworld 0.1.3.post1 (pydantic 1) with ray<2.56, the core and this plugin.")]


@hookimpl
def beyondagent_envs() -> list[EnvSpec]:
    return [EnvSpec(name="appworld", factory=f"{_PACKAGE}.env:AppWorldEnv", config_cls=AppWorldConfig,
                    venv="appworld", serve_args=SERVE_ARGS,
                    summary="AppWorld: write Python against 9 apps' APIs; graded by AppWorld's own checks.")]


@hookimpl
def beyondagent_task_sources() -> list[TaskSourceSpec]:
    return [TaskSourceSpec(name="appworld", factory=f"{_PACKAGE}.tasks:AppWorldTasks", config_cls=AppWorldTasksConfig,
                           summary="AppWorld tasks of a split (train, dev, test_normal, test_challenge).")]


@hookimpl
def beyondagent_workflows() -> list[WorkflowSpec]:
    return [WorkflowSpec(name="appworld_react", factory=f"{_PACKAGE}.workflow:AppWorldReact",
                         config_cls=AppWorldReactConfig,
                         summary="Code-writing ReAct for AppWorld: discover APIs, one code block per turn.")]


@hookimpl
def beyondagent_rewards() -> list[RewardSpec]:
    return [RewardSpec(name="appworld", factory=f"{_PACKAGE}.judge:AppWorldJudge", config_cls=AppWorldJudgeConfig,
                       summary="AppWorld's evaluate_task (passed checks, failed ones in details).")]


@hookimpl
def beyondagent_commands() -> list[CommandSpec]:
    return [CommandSpec(name="appworld", factory=f"{_PACKAGE}.commands:add_appworld_command",
                        summary="AppWorld: setup (venv + data), check, generate (a small real world).")]
