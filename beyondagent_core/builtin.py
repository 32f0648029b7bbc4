"""The components that ship with the core, registered through the same hooks as any plugin.

Listed as the plugin `builtin` of the distribution `beyondagent`: the task sources that read
files, the `react` workflow, the `env` reward and the `export` backend. None of them
asks an LLM. The environment service (`env serve`, `env.service: launch | URL`, the `envservice`
task source) is beyondagent-plugin-envservice's; the `agent` workflow and its OpenAI-compatible
gateway are beyondagent-plugin-gateway's; task synthesis is a plugin's too: without an LLM beyondagent-plugin-synthesis (`hindsight`,
`dedup`, `min_confidence`), with one beyondagent-plugin-llm (`llm`, `feasibility`, `llm_judge`).
"""

from __future__ import annotations

from beyondagent_core.export import ExportConfig
from beyondagent_core.hookspecs import hookimpl
from beyondagent_core.records import (
    BackendSpec,
    RewardSpec,
    TaskSourceSpec,
    WorkflowSpec,
)
from beyondagent_core.runtime.react import ReactConfig
from beyondagent_core.sources.jsonl import JsonlSourceConfig
from beyondagent_core.sources.parquet import ParquetSourceConfig


@hookimpl
def beyondagent_task_sources() -> list[TaskSourceSpec]:
    return [
        TaskSourceSpec(
            name="jsonl",
            factory="beyondagent_core.sources.jsonl:JsonlTaskSource",
            config_cls=JsonlSourceConfig,
            summary="Task records from a JSON-lines file.",
        ),
        TaskSourceSpec(
            name="parquet",
            factory="beyondagent_core.sources.parquet:ParquetTaskSource",
            config_cls=ParquetSourceConfig,
            summary="Rows in verl's parquet schema (data_source, prompt, reward_model, extra_info).",
        ),
    ]


@hookimpl
def beyondagent_backends() -> list[BackendSpec]:
    return [
        BackendSpec(
            name="export",
            factory="beyondagent_core.export:ExportBackend",
            config_cls=ExportConfig,
            summary="Write each epoch's mixed tasks (JSONL or verl parquet) instead of training.",
        ),
    ]


@hookimpl
def beyondagent_workflows() -> list[WorkflowSpec]:
    return [
        WorkflowSpec(
            name="react",
            factory="beyondagent_core.runtime.react:ReactWorkflow",
            config_cls=ReactConfig,
            summary="Act, observe, repeat: the env's system prompt, one env step per model turn.",
        ),
    ]


@hookimpl
def beyondagent_rewards() -> list[RewardSpec]:
    return [
        RewardSpec(
            name="env",
            factory="beyondagent_core.judging:EnvJudge",
            summary="The environment's own evaluate() (checks a hindsight task's goal): no LLM.",
        ),
    ]
