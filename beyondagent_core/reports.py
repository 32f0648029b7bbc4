"""The run's report page, asked of the plugin that draws it (the `beyondagent_write_report` hook).

Backends call `write_run_report` when a run ends (and the pipeline when one is interrupted); the page
itself (`report.html`: curves, a summary, sample episodes) is beyondagent-plugin-report's, so the core
imports no plotting library. Without a plugin that draws it, a run has no page and says how to get one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from beyondagent_core.logs import get_logger

log = get_logger("beyondagent.reports")
_said_missing = False


def write_run_report(manager: Any, run_dir: Path, *, title: str | None = None, stopped: str | None = None) -> Path | None:
    """`<run_dir>/report.html`, drawn by the installed report plugin; None (logged once) without one.
    A plugin's error is raised: the caller decides that a missing page does not fail a run."""
    global _said_missing
    path = manager.first_answer("beyondagent_write_report", run_dir=Path(run_dir), title=title, stopped=stopped)
    if path is None and not _said_missing:
        _said_missing = True
        log.info("run.no_report", hint="pip install beyondagent-plugin-report draws report.html from the run's records")
    return Path(path) if path is not None else None
