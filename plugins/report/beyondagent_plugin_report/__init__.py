"""BeyondAgent's evaluation and reports: `beyondagent eval` (a model on a split of a spec's tasks,
avg@k, best@k, pass@k), `beyondagent report` (a run's report.html drawn again) and the report page
every run writes when it ends (the `beyondagent_write_report` hook, which backends ask through
`beyondagent_core.reports`).

- `report.py`: the page (curves from `metrics.jsonl`, a summary, sample episodes from `samples.jsonl`);
- `eval/`: the eval (`evaluation`), its numbers (`stats`), its page and its command;
- `commands.py`: `beyondagent report`.

Nothing heavy is imported here: matplotlib and the eval load when they are used.
"""

from __future__ import annotations

from pathlib import Path

from beyondagent_core import CommandSpec, hookimpl

__all__ = ["beyondagent_commands", "beyondagent_write_report"]


@hookimpl
def beyondagent_commands() -> list[CommandSpec]:
    return [
        CommandSpec(name="eval", factory="beyondagent_plugin_report.eval.command:add_eval_arguments",
                    summary="Evaluate a model on a split of a spec's tasks: avg@k, best@k, pass@k, without training."),
        CommandSpec(name="report", factory="beyondagent_plugin_report.commands:add_report_arguments", summary="Draw a run's report.html again from its records."),
    ]


@hookimpl
def beyondagent_write_report(run_dir: Path, title: str | None, stopped: str | None) -> Path:
    from beyondagent_plugin_report.report import write_report

    return write_report(run_dir, title=title, stopped=stopped)
