"""`beyondagent view`: a local web app over run directories (see docs/inspect.md).

The plugin adds one command through `beyondagent_commands`; nothing is imported until it runs.
`command` (the CLI), `app` (Starlette routes), `index` (the incremental sqlite index of
`episodes.jsonl`), `queries` (filters, sorting, paging), `pages` / `assets` / `charts` (HTML).
"""

from __future__ import annotations

from beyondagent_core import CommandSpec, hookimpl

__all__ = ["beyondagent_commands"]


@hookimpl
def beyondagent_commands() -> list[CommandSpec]:
    return [CommandSpec(name="view", factory="beyondagent_plugin_view.command:add_view_command",
                        summary="Browse a run's episodes in the browser: turns, trained tokens, log-probs, "
                                "advantages, groups, curves.")]
