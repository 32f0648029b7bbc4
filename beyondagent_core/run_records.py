"""A run's records on disk, for every backend: `metrics.jsonl` (one line per step) and `samples.jsonl`.

Backends write them (the torch backend through its `MetricsLog`, the verl backend from verl's
step metrics), the report and the viewer read them. `read_metrics` / `read_samples` tolerate a
truncated last line (a killed run); `json_safe` turns NaN and infinities into null.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from beyondagent_core import metric_names
from beyondagent_core.jsonl import loads_line
from beyondagent_core.logs import get_logger

log = get_logger(__name__)

METRICS_FILE = "metrics.jsonl"
SAMPLES_FILE = "samples.jsonl"


def finite_scalar(value: Any) -> float | None:
    """`value` as a float if it is a finite real number (a one-element tensor counts), else None."""
    if isinstance(value, str | bytes):
        return None
    if not isinstance(value, numbers.Real) and hasattr(value, "item"):
        try:
            value = value.item()  # torch / numpy scalars and one-element tensors
        except (ValueError, RuntimeError, TypeError):
            return None
    if not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def json_safe(value: Any) -> Any:
    """`value` with NaN and infinities (anywhere inside) as None and tensor/numpy scalars as plain numbers."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return finite_scalar(value)
    if hasattr(value, "item"):  # torch / numpy values
        try:
            return json_safe(value.item())
        except (ValueError, RuntimeError, TypeError):
            return json_safe(value.tolist()) if hasattr(value, "tolist") else str(value)
    return value


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The records of `<run_dir>/metrics.jsonl` in file order ([] when there is none).

    A truncated last line (a killed run) is dropped quietly; any other line that is not a JSON
    object with an integer `step` (malformed, nested too deeply, a number too long to read) is
    skipped with a `metrics.bad_line` warning naming the file and line.
    """
    return _read_lines(Path(run_dir) / METRICS_FILE, _metrics_problem)


def read_samples(run_dir: Path) -> list[dict[str, Any]]:
    """The records of `<run_dir>/samples.jsonl` (see `read_metrics` for bad lines)."""
    return _read_lines(Path(run_dir) / SAMPLES_FILE, _sample_problem)


def _metrics_problem(record: dict[str, Any]) -> str | None:
    step = record.get(metric_names.STEP)
    if not isinstance(step, int) or isinstance(step, bool):
        return f"no integer {metric_names.STEP!r} (got {type(step).__name__})"
    return None


def _sample_problem(record: dict[str, Any]) -> str | None:
    if not isinstance(record.get("trajectory"), dict):
        return "no 'trajectory' object"
    return _metrics_problem(record)


def _read_lines(path: Path, problem: Callable[[dict[str, Any]], str | None]) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = loads_line(line)
        except ValueError as exc:
            if number != len(lines):  # the last line of a killed run may be cut off: expected
                log.warning("metrics.bad_line", where=f"{path}:{number}", reason=str(exc))
            continue
        reason = f"a JSON {type(record).__name__}, not an object" if not isinstance(record, dict) else problem(record)
        if reason is not None:
            log.warning("metrics.bad_line", where=f"{path}:{number}", reason=reason)
            continue
        records.append(record)
    return records
