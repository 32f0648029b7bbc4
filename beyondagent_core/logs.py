"""structlog, configured once: readable events on the console, JSON lines in the run directory.

Events are key-value: `log.info("explore.finished", seed="t1", tasks=3)`. The same event goes
to the console (stderr) and, once a run directory exists, to `<run_dir>/events.jsonl`, so
nothing is printed twice in two formats.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

import structlog

from beyondagent_core.secrets import redact_event

_events_file: TextIO | None = None


def _write_json_line(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    if _events_file is not None:
        # `exc_info=True` becomes the traceback text in the file (the console renders its own).
        record = redact_event(logger, method, structlog.processors.format_exc_info(logger, method, dict(event)))
        _events_file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        _events_file.flush()
    return event


def _drop_traceback(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Without `-v` the console gets no traceback (events.jsonl still has it)."""
    event.pop("exc_info", None)
    event.pop("exception", None)
    return event


def configure_logging(*, verbose: bool = False, level: str = "info") -> None:
    """Set up console logging; `-v` (verbose) shows debug events and full tracebacks."""
    threshold = logging.DEBUG if verbose else logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            redact_event,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _write_json_line,
            *([] if verbose else [_drop_traceback]),
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def log_events_to(path: Path | None) -> None:
    """Also append every event as JSON to `path` (None stops it)."""
    global _events_file
    if _events_file is not None:
        _events_file.close()
        _events_file = None
    if path is not None:
        _ensure_json_lines_processor()
        path.parent.mkdir(parents=True, exist_ok=True)
        _events_file = path.open("a", encoding="utf-8")


def _ensure_json_lines_processor() -> None:
    """Runs started without the CLI (the pipeline as a library, the pytest kit) still get
    their events.jsonl: add our processor before the renderer of whatever config is active."""
    processors = list(structlog.get_config()["processors"])
    if _write_json_line not in processors:
        processors.insert(max(len(processors) - 1, 0), _write_json_line)
        structlog.configure(processors=processors)
