"""What a backend receives: the mixed training data and the run it belongs to."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from beyondagent_core.types import Task

if TYPE_CHECKING:
    from beyondagent_core.plugins import PluginManager
    from beyondagent_core.protocols import Mixer
    from beyondagent_core.spec import Spec


@attrs.frozen
class RunInfo:
    """What lifecycle hooks are told about a run (the spec with secrets redacted)."""

    name: str
    run_dir: Path
    seed: int
    spec: dict[str, Any]


@attrs.define
class TrainingData:
    """Original and synthetic tasks, and the mixer that turns them into each epoch's list."""

    original: list[Task]
    synthetic: list[Task]
    val: list[Task]
    mixer: Mixer
    seed: int

    def epoch_tasks(self, epoch: int) -> list[Task]:
        """The training tasks of `epoch` (0-based), re-mixed deterministically each epoch."""
        return self.mixer.mix(self.original, self.synthetic, epoch=epoch, seed=self.seed)


@attrs.define
class RunContext:
    """A run in progress: its spec, directory, and the way to build components and report."""

    spec: Spec
    info: RunInfo
    manager: PluginManager
    log: Any = attrs.field(factory=lambda: structlog.get_logger("beyondagent.run"))

    @property
    def run_dir(self) -> Path:
        return self.info.run_dir

    def build(self, key_path: str) -> Any:
        """Create the component the spec selects at `key_path` (e.g. `"env"`, `"reward"`)."""
        component = self.spec.component(key_path)
        if component is None or component.registration is None:
            return None
        return component.create()

    def step_finished(self, step: int, metrics: dict[str, Any]) -> None:
        """Report one training step: logged as an event and passed to lifecycle hooks."""
        self.log.info("train.step", step=step, **metrics)
        self.manager.notify("beyondagent_step_finished", run=self.info, step=step, metrics=metrics)
