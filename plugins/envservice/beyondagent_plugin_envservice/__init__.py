"""The environment service: any registered env over HTTP, compatible with AgentEvolver's EnvService
(beyondagent-plugin-envservice).

What it adds to BeyondAgent, through the same hooks as any plugin:

- `beyondagent env serve --env NAME` (the commands hook; `command.py`);
- `env.service: launch | http(s)://...` in a spec: the core asks the `beyondagent_remote_env` hook
  for the run's env opener (`openers.py`), so envs with their own venv (AppWorld, BFCL) run in a
  server of their own;
- the `envservice` task source: a split's task ids from a running service (`source.py`).

The modules, one job each:

- `protocol`: request parsing, reply shapes and error codes (shared by server and client);
- `instances` / `process_instances` / `ray_instances`: where served envs live (worker threads, a
  worker process each, or Ray actors); `thread_calls`: env calls on threads that can be abandoned;
- `server`: the Starlette app and how it is served (slow-client guards: `beyondagent_core.serving`);
- `client` / `transport`: the async client and `RemoteEnv` (an `AsyncEnv` over HTTP);
- `launch`: the server as a child process of a run (`env.service: launch`).

Nothing heavy is imported here: listing plugins imports only the task source's config.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core import CommandSpec, TaskSourceSpec, hookimpl
from beyondagent_plugin_envservice.source import EnvServiceSourceConfig

__all__ = ["beyondagent_commands", "beyondagent_remote_env", "beyondagent_task_sources"]


@hookimpl
def beyondagent_task_sources() -> list[TaskSourceSpec]:
    return [TaskSourceSpec(
        name="envservice", factory="beyondagent_plugin_envservice.source:EnvServiceTaskSource",
        config_cls=EnvServiceSourceConfig,
        summary="Seed task ids of a split from a running environment service (/get_env_profile).")]


@hookimpl
def beyondagent_commands() -> list[CommandSpec]:
    return [CommandSpec(name="env", factory="beyondagent_plugin_envservice.command:add_env_arguments",
                        summary="Serve an environment over HTTP (the environment service, compatible with "
                                "AgentEvolver's EnvService).")]


@hookimpl
def beyondagent_remote_env(env_name: str, service: str, where: str, config: dict[str, Any],
                           launch: dict[str, Any]) -> Any:
    from beyondagent_plugin_envservice.openers import remote_opener

    return remote_opener(env_name, service, where=where, config=config, launch=launch)
