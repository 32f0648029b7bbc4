"""What a backend receives: the mixed training data and the run it belongs to."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import structlog

from beyondagent_core.errors import SpecError
from beyondagent_core.types import Task

if TYPE_CHECKING:
    from beyondagent_core.plugins import PluginManager
    from beyondagent_core.protocols import Env, Mixer, Workflow
    from beyondagent_core.runtime.episodes import EpisodeRunner
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
    """A run in progress: its spec, directory, and the way to build components and report.

    `resume` is set by `beyondagent run --resume`: the backend continues from its last
    checkpoint in `run_dir` (and says which spec keys differ when it cannot).
    """

    spec: Spec
    info: RunInfo
    manager: PluginManager
    resume: bool = False
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

    def env_factory(self) -> Callable[[], Env]:
        """Makes one env per episode as `env` selects (`service: local` runs it in-process)."""
        component = self.spec.component("env")
        if component is None or component.registration is None:
            raise SpecError("training needs an environment but env.name is not set",
                            where=f"{self.spec.path}, key env.name", hint="set env.name (see `beyondagent plugins`)")
        service = component.block.service
        if service != "local":
            raise SpecError(f"env.service {service!r} is not supported by this version",
                            where=f"{self.spec.path}, key env.service", hint="use env.service: local")
        return component.create

    def workflow(self) -> Workflow:
        """The workflow `workflow` selects; the built-in `react` loop when none is set."""
        from beyondagent_core.runtime.react import ReactWorkflow

        return self.build("workflow") or ReactWorkflow()

    def episode_runner(self) -> EpisodeRunner:
        """Everything an episode needs: the workflow, an env per episode, and the judge (`reward`)."""
        from beyondagent_core.runtime.episodes import EpisodeRunner

        return EpisodeRunner(workflow=self.workflow(), make_env=self.env_factory(), judge=self.build("reward"))

    def step_finished(self, step: int, metrics: dict[str, Any]) -> None:
        """Report one training step: logged as an event and passed to lifecycle hooks."""
        self.log.info("train.step", step=step, **metrics)
        self.manager.notify("beyondagent_step_finished", run=self.info, step=step, metrics=metrics)
