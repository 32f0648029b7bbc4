"""A training run's metrics and sample episodes, on disk: `metrics.jsonl`, `samples.jsonl`, TensorBoard.

`MetricsLog.write(step, metrics)` appends one JSON line per step to `<run_dir>/metrics.jsonl`
(fsynced, so a killed run keeps every finished step) and, when TensorBoard is wanted, the same
scalars to `<run_dir>/tensorboard/`. Values that are not finite numbers never reach TensorBoard;
in JSON, NaN and infinities are written as null. `write_samples` keeps a few whole episodes per
step in `<run_dir>/samples.jsonl` for the report (`beyondagent_core.run_records` reads them back);
`write_episodes` appends the per-episode token records of `beyondagent view` to `episodes.jsonl`
(`beyondagent_core.episode_records` has their format).
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from beyondagent_core import metric_names
from beyondagent_core.episode_records import EPISODES_FILE
from beyondagent_core.errors import BeyondAgentError
from beyondagent_core.jsonl import append_jsonl
from beyondagent_core.logs import get_logger
from beyondagent_core.run_records import (  # noqa: F401 - read_* re-exported for the backend's callers
    METRICS_FILE,
    SAMPLES_FILE,
    finite_scalar,
    json_safe,
    read_metrics,
    read_samples,
)
from beyondagent_core.types import Trajectory

log = get_logger(__name__)

TENSORBOARD_DIR = "tensorboard"


class MetricsLog:
    """Appends a run's per-step metrics and sample episodes to its run directory.

    `tensorboard`: None writes TensorBoard event files when the `tensorboard` package is
    installed; True requires it (a `BeyondAgentError` saying how to install it otherwise);
    False never writes them.
    """

    def __init__(self, run_dir: Path, *, tensorboard: bool | None = None, purge_step: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / METRICS_FILE
        self.samples_path = self.run_dir / SAMPLES_FILE
        self.episodes_path = self.run_dir / EPISODES_FILE
        self._writer = _open_summary_writer(self.run_dir / TENSORBOARD_DIR, tensorboard, purge_step)

    @property
    def tensorboard(self) -> bool:
        """Whether scalars are also going to TensorBoard."""
        return self._writer is not None

    def write(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Append `{"step": step, "time": <unix time>, **metrics}` and log the finite scalars."""
        reserved = sorted(set(metrics) & set(metric_names.RESERVED))
        if reserved:
            raise ValueError(f"metric names {reserved} are reserved: MetricsLog.write adds them itself")
        record: dict[str, Any] = {metric_names.STEP: int(step), metric_names.TIME: time.time()}
        record.update({str(name): json_safe(value) for name, value in metrics.items()})
        append_jsonl(self.metrics_path, [record])
        if self._writer is not None:
            for name, value in metrics.items():
                scalar = finite_scalar(value)
                if scalar is not None:
                    self._writer.add_scalar(str(name), scalar, int(step))
            self._writer.flush()

    def write_samples(self, step: int, split: str, trajectories: Iterable[Trajectory]) -> None:
        """Append one `{"step", "split", "trajectory"}` line per episode to `samples.jsonl`."""
        records = [
            {"step": int(step), "split": split, "trajectory": json_safe(trajectory.to_dict())}
            for trajectory in trajectories
        ]
        if records:
            append_jsonl(self.samples_path, records)

    def write_episodes(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append `episode_record` lines (NaN and infinities as null) to `episodes.jsonl`."""
        lines = [json_safe(record) for record in records]
        if lines:
            append_jsonl(self.episodes_path, lines)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def _open_summary_writer(log_dir: Path, wanted: bool | None, purge_step: int | None = None) -> Any:
    """A `SummaryWriter` on `log_dir`, or None when TensorBoard is off or (for None) not installed.

    `purge_step` (a resumed run): TensorBoard hides what earlier event files logged at or after it.
    """
    if wanted is False:
        return None
    if importlib.util.find_spec("tensorboard") is None:
        if wanted:
            raise _tensorboard_missing()
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as exc:
        if wanted:
            raise _tensorboard_missing(str(exc)) from None
        log.warning("metrics.tensorboard_unavailable", reason=str(exc))
        return None
    return SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)


def _tensorboard_missing(reason: str | None = None) -> BeyondAgentError:
    detail = f" ({reason})" if reason else ""
    return BeyondAgentError(
        f"TensorBoard logging was asked for, but the tensorboard package cannot be imported{detail}",
        hint="pip install 'beyondagent-plugin-torch[tensorboard]', or turn TensorBoard logging off",
    )
