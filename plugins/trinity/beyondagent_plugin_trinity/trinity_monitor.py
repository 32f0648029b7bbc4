"""Trinity-RFT's step metrics in our run directory: its MONITOR `beyondagent` (registered by `registration.py`).

trinity's explorer and trainer each make one monitor (`monitor.monitor_type`) and call
`log(metrics, step)` once a step. Ours is trinity's TensorBoard monitor (TensorBoard files and the
console line as before) that also appends each call, as one JSON line `{"step", "time", "role",
"metrics"}`, to `<metrics_dir>/trinity_metrics.<role>.jsonl`; the mapping sets `metrics_dir` to
`<run_dir>/trinity` (`monitor.monitor_args`).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from trinity.utils.monitor import TensorboardMonitor


class BeyondAgentMonitor(TensorboardMonitor):
    def __init__(self, project: str, group: str, name: str, role: str, config: Any = None) -> None:
        super().__init__(project, group, name, role, config)
        self.role = role
        args = (config.monitor.monitor_args or {}) if config is not None else {}
        directory = Path(args.get("metrics_dir") or config.monitor.cache_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"trinity_metrics.{role}.jsonl"

    @classmethod
    def default_args(cls) -> dict[str, Any]:
        return {"metrics_dir": None}

    def log(self, data: dict, step: int, commit: bool = False) -> None:
        super().log(data, step, commit)
        line = {"step": int(step), "time": time.time(), "role": self.role,
                "metrics": {str(key): _number(value) for key, value in data.items()}}
        with self.path.open("a") as out:
            out.write(json.dumps(line) + "\n")


def _number(value: Any) -> float | None:
    """A metric as a JSON number (tensors and numpy scalars included); None when it is not finite."""
    try:
        number = float(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
