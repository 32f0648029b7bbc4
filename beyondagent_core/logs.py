"""structlog, configured once: readable events on the console, JSON lines in the run directory.

Events are key-value: `log.info("explore.finished", seed="t1", tasks=3)`. The same event goes
to the console (stderr) and, once a run directory exists, to `<run_dir>/events.jsonl`, so
nothing is printed twice in two formats; there each line carries the run's `run_id`, and the
file keeps the last runs only (`events.py`).

structlog (with rich, which its console renderer uses) takes ~85 ms to import, more than half
of what `beyondagent plugins` or `--version` needs in all. So modules get their logger from
`get_logger`, which imports structlog at the first event, and `configure_logging` before
structlog is imported only notes the settings, applied when it is (`apply_pending`).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

from beyondagent_core.secrets import redact_event

_events_file: TextIO | None = None
_run_id: str | None = None  # of the run whose events go to `_events_file`
_pending: dict[str, Any] | None = None  # configure_logging's settings, while structlog is not imported


# The level of each logging method, to drop an event below the configured level unimported.
_METHOD_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "msg": logging.INFO, "warning": logging.WARNING,
                  "warn": logging.WARNING, "error": logging.ERROR, "exception": logging.ERROR,
                  "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


def _ignore(*args: Any, **kwargs: Any) -> None:
    return None


class LazyLogger:
    """A structlog logger that imports (and configures) structlog at its first use: an event below
    the level `configure_logging` noted (a debug event, usually) is dropped without it."""

    def __init__(self, name: str | None):
        self._name = name
        self._logger: Any = None

    def __getattr__(self, attribute: str) -> Any:  # info, warning, bind, ...: structlog's logger's
        if self._logger is None:
            if _pending is not None and _METHOD_LEVELS.get(attribute, logging.CRITICAL + 1) < _threshold(**_pending):
                return _ignore
            import structlog

            apply_pending()
            self._logger = structlog.get_logger(self._name) if self._name else structlog.get_logger()
        return getattr(self._logger, attribute)


def get_logger(name: str | None = None) -> Any:
    """The logger of `name` (`structlog.get_logger(name)`, imported at the first event)."""
    return LazyLogger(name)


def apply_pending() -> None:
    """Apply `configure_logging`'s settings noted before structlog was imported."""
    global _pending
    if _pending is not None:
        settings, _pending = _pending, None
        _configure(**settings)


def _write_json_line(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    if _events_file is not None:
        # `exc_info=True` becomes the traceback text in the file (the console renders its own).
        import structlog

        record = redact_event(logger, method, structlog.processors.format_exc_info(logger, method, dict(event)))
        record = {"run_id": _run_id, **record}  # first: `events.py` reads it without parsing the line
        _events_file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        _events_file.flush()
    return event


def _redacted_traceback(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """With `-v` the console gets the traceback as text, redacted like the rest of the event (the
    renderer's own would print exception messages and local variables as they are)."""
    if "exc_info" not in event:
        return event
    import structlog

    return redact_event(logger, method, structlog.processors.format_exc_info(logger, method, event))


def _drop_traceback(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Without `-v` the console gets no traceback (events.jsonl still has it)."""
    event.pop("exc_info", None)
    event.pop("exception", None)
    return event


def configure_logging(*, verbose: bool = False, level: str = "info") -> None:
    """Set up console logging; `-v` (verbose) shows debug events and full tracebacks. Applied
    now when structlog is imported, else at the first event (`LazyLogger`) or `apply_pending`."""
    global _pending
    if "structlog" in sys.modules:
        _pending = None
        _configure(verbose=verbose, level=level)
    else:
        _pending = {"verbose": verbose, "level": level}


class _CurrentStderr:
    """`sys.stderr` as it is at each write, not at configuration: whoever swaps it (pytest's capsys,
    an embedding app) and closes the old one must not leave the console logger writing to a closed file."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _threshold(*, verbose: bool, level: str) -> int:
    return logging.DEBUG if verbose else logging.getLevelNamesMapping().get(level.upper(), logging.INFO)


def _configure(*, verbose: bool, level: str) -> None:
    import structlog

    threshold = _threshold(verbose=verbose, level=level)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            redact_event,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _write_json_line,
            _redacted_traceback if verbose else _drop_traceback,
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),
        cache_logger_on_first_use=False,
    )


def log_events_to(path: Path | None, *, run_id: str | None = None) -> str | None:
    """Also append every event as JSON to `path` (None stops it), each line tagged with `run_id`
    (a new one by default), after dropping all but the last runs' lines; returns the run id."""
    global _events_file, _run_id
    if _events_file is not None:
        _events_file.close()
        _events_file = None
    if path is None:
        _run_id = None
        return None
    from beyondagent_core.events import KEEP_RUNS, keep_last_runs, new_run_id

    _ensure_json_lines_processor()
    path.parent.mkdir(parents=True, exist_ok=True)
    keep_last_runs(path, KEEP_RUNS - 1)  # this run is the last one
    _run_id = run_id or new_run_id()
    _events_file = path.open("a", encoding="utf-8")
    return _run_id


def _ensure_json_lines_processor() -> None:
    """Runs started without the CLI (the pipeline as a library, the pytest kit) still get
    their events.jsonl: add our processor before the renderer of whatever config is active."""
    import structlog

    apply_pending()
    processors = list(structlog.get_config()["processors"])
    if _write_json_line not in processors:
        processors.insert(max(len(processors) - 1, 0), _write_json_line)
        structlog.configure(processors=processors)
