"""BFCL for BeyondAgent: env, task source, workflow, judge, its venv and CLI.

Registers the env `bfcl` (served out of process from the `bfcl` venv: bfcl-eval pins numpy 1.26
and a dozen provider SDKs), the task source `bfcl`, the workflow `bfcl`, the judge `bfcl`, the
venv `bfcl` and the command `beyondagent bfcl setup|check|agree`. Imports here are light:
factories are `"module:attr"` strings.
"""

from __future__ import annotations

from beyondagent_core import CommandSpec, EnvSpec, RewardSpec, TaskSourceSpec, VenvSpec, WorkflowSpec, hookimpl
from beyondagent_plugin_bfcl.config import BFCLConfig, BFCLJudgeConfig, BFCLTasksConfig, BFCLWorkflowConfig

__all__ = ["beyondagent_commands", "beyondagent_envs", "beyondagent_rewards", "beyondagent_task_sources",
           "beyondagent_venvs", "beyondagent_workflows"]

_PACKAGE = "beyondagent_plugin_bfcl"
# Episodes are cheap Python objects: threads in one process. The model's calls never run there:
# each multi-turn episode's backends live in a child process with a memory cap and a deadline per
# step that kills a call which never yields the GIL (`sandbox.py`, docs/bfcl.md 'Bounds'), well
# inside the service's call timeout.
SERVE_ARGS = ("--call-timeout", "60")


@hookimpl
def beyondagent_venvs() -> list[VenvSpec]:
    return [VenvSpec(name="bfcl", factory=f"{_PACKAGE}.venv:bfcl_recipe",
                     summary="bfcl-eval 2026.3.23 (--no-deps, numpy 1.26.4, the SDKs its checkers import), "
                             "the core and this plugin.")]


@hookimpl
def beyondagent_envs() -> list[EnvSpec]:
    return [EnvSpec(name="bfcl", factory=f"{_PACKAGE}.env:BFCLEnv", config_cls=BFCLConfig, venv="bfcl",
                    serve_args=SERVE_ARGS,
                    summary="BFCL: function calls on BFCL's own backends (multi-turn) or AST-checked (single-turn).")]


@hookimpl
def beyondagent_task_sources() -> list[TaskSourceSpec]:
    return [TaskSourceSpec(name="bfcl", factory=f"{_PACKAGE}.tasks:BFCLTasks", config_cls=BFCLTasksConfig,
                           summary="BFCL tasks of some categories (multi_turn_base, simple_python, ...) in a split.")]


@hookimpl
def beyondagent_workflows() -> list[WorkflowSpec]:
    return [WorkflowSpec(name="bfcl", factory=f"{_PACKAGE}.workflow:BFCLWorkflow", config_cls=BFCLWorkflowConfig,
                         summary="Function calling: BFCL's functions as tools, calls parsed, results observed.")]


@hookimpl
def beyondagent_rewards() -> list[RewardSpec]:
    return [RewardSpec(name="bfcl", factory=f"{_PACKAGE}.judge:BFCLJudge", config_cls=BFCLJudgeConfig,
                       summary="BFCL's own checkers (multi-turn state + response, single-turn AST): official 1/0.")]


@hookimpl
def beyondagent_commands() -> list[CommandSpec]:
    return [CommandSpec(name="bfcl", factory=f"{_PACKAGE}.commands:add_bfcl_command",
                        summary="BFCL: setup (the venv), check (load every category), agree (agreement with BFCL).")]
