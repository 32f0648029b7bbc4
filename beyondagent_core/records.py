"""Registration records: what a plugin's hooks return, one per component it provides.

A record is `(name, factory, config_cls, summary)`. `factory(config)` builds the component
from its validated config (an instance of `config_cls`); it may be given as a
`"module:attr"` string that is imported only when a spec selects the component, so a
plugin whose optional dependency is missing breaks only the runs that use it. The registry
adds the provider (entry-point name, distribution, version) when it collects the records.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Any, ClassVar

import attrs

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


@attrs.define(frozen=True)
class NoConfig:
    """The config of a component that takes no options."""


def _check_name(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise ValueError(
            f"{type(instance).__name__}.name must be letters, digits, '_', '-' or '.' "
            f"(no '/', which separates plugin and name), got {value!r}"
        )


def _check_factory(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, str):
        if value.count(":") != 1 or not all(value.split(":")):
            raise ValueError(f"{type(instance).__name__}.factory string must look like 'module:attr', got {value!r}")
    elif not callable(value):
        raise ValueError(f"{type(instance).__name__}.factory must be callable or a 'module:attr' string, got {value!r}")


def _check_config_cls(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not (isinstance(value, type) and attrs.has(value)):
        raise ValueError(f"{type(instance).__name__}.config_cls must be an attrs class, got {value!r}")


@attrs.frozen
class ComponentSpec:
    """Base of every registration record; `kind` says which hook returns it."""

    kind: ClassVar[str] = ""
    label: ClassVar[str] = ""

    name: str = attrs.field(validator=_check_name)
    factory: Callable[..., Any] | str = attrs.field(validator=_check_factory)
    config_cls: type = attrs.field(default=NoConfig, validator=_check_config_cls)
    summary: str = ""

    def load_factory(self) -> Callable[..., Any]:
        """Return the factory, importing it first when it was given as `"module:attr"`."""
        if not isinstance(self.factory, str):
            return self.factory
        module_name, _, attr_path = self.factory.partition(":")
        target: Any = importlib.import_module(module_name)
        for part in attr_path.split("."):
            target = getattr(target, part)
        return target


@attrs.frozen
class TaskSourceSpec(ComponentSpec):
    """Provides seed tasks: `factory(config) -> TaskSource`."""

    kind: ClassVar[str] = "task_source"
    label: ClassVar[str] = "task source"


@attrs.frozen
class EnvSpec(ComponentSpec):
    """Provides an environment: `factory(config) -> Env` (one instance per episode).

    An env whose stack cannot live in the main environment names the venv it runs in (`venv`,
    a `VenvSpec` name): it is then always served out of process (`env.service: launch` starts
    `beyondagent env serve` with that venv's python, adding `serve_args`, e.g. one process per
    instance); `env.service: local` is refused with that reason.
    """

    kind: ClassVar[str] = "env"
    label: ClassVar[str] = "environment"

    venv: str | None = None
    serve_args: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen
class WorkflowSpec(ComponentSpec):
    """Provides an agent workflow: `factory(config) -> Workflow`."""

    kind: ClassVar[str] = "workflow"
    label: ClassVar[str] = "workflow"


@attrs.frozen
class ExplorerSpec(ComponentSpec):
    """Provides an exploration strategy: `factory(config) -> Explorer`."""

    kind: ClassVar[str] = "explorer"
    label: ClassVar[str] = "explorer"


@attrs.frozen
class SummarizerSpec(ComponentSpec):
    """Provides a task summarizer: `factory(config) -> Summarizer`."""

    kind: ClassVar[str] = "summarizer"
    label: ClassVar[str] = "summarizer"


@attrs.frozen
class TaskFilterSpec(ComponentSpec):
    """Provides a synthetic-task filter: `factory(config) -> TaskFilter`."""

    kind: ClassVar[str] = "task_filter"
    label: ClassVar[str] = "task filter"


@attrs.frozen
class MixerSpec(ComponentSpec):
    """Provides a mixing strategy: `factory(config) -> Mixer`."""

    kind: ClassVar[str] = "mixer"
    label: ClassVar[str] = "mixer"


@attrs.frozen
class RewardSpec(ComponentSpec):
    """Provides a judge: `factory(config) -> Judge` (scores a trajectory as a `Reward`)."""

    kind: ClassVar[str] = "reward"
    label: ClassVar[str] = "reward"


@attrs.frozen
class AdvantageSpec(ComponentSpec):
    """Provides an advantage estimator: `factory(config) -> AdvantageEstimator` (the spec's
    `backend.advantage`; `beyondagent_core.advantages` holds what it receives and returns).
    `uses_values`: the estimator reads a critic's per-token values (`ScoredEpisode.values`, e.g.
    GAE), so the backend trains a critic (the spec's `critic:`) on the returns it answers with."""

    kind: ClassVar[str] = "advantage"
    label: ClassVar[str] = "advantage estimator"

    uses_values: bool = False


@attrs.frozen
class ExperienceStoreSpec(ComponentSpec):
    """Provides an experience store: `factory(config) -> ExperienceStore` (the spec's
    `experience`; `beyondagent_core.experience` holds the records it keeps)."""

    kind: ClassVar[str] = "experience_store"
    label: ClassVar[str] = "experience store"


@attrs.frozen
class BackendSpec(ComponentSpec):
    """Provides a training backend: `factory(config) -> Backend`."""

    kind: ClassVar[str] = "backend"
    label: ClassVar[str] = "backend"


@attrs.frozen
class VenvSpec(ComponentSpec):
    """Provides a cached virtualenv a plugin needs: `factory() -> VenvRecipe` (`beyondagent_core.venvs`).

    Not selected by a spec: the plugin builds it with `ensure_venv(recipe)` where it needs it,
    and `beyondagent venv list|build` shows and builds every registered one.
    """

    kind: ClassVar[str] = "venv"
    label: ClassVar[str] = "venv"


@attrs.frozen
class CommandSpec(ComponentSpec):
    """Provides a CLI command, `beyondagent <name> ...`: `factory(parser) -> handler`.

    `factory` gets the command's `argparse` parser, adds its arguments (or sub-commands), and
    returns `handler(args) -> int`, the exit status. Raise `BeyondAgentError` for user errors.
    """

    kind: ClassVar[str] = "command"
    label: ClassVar[str] = "command"


def _settings_as_given(config: Any) -> Any:
    return config


@attrs.frozen
class SettingsSpec(ComponentSpec):
    """Declares the block a plugin reads under `plugins.settings.<name>` (a lifecycle-hook plugin's
    settings, e.g. notify's webhook URLs): `config_cls` is its schema.

    `beyondagent validate` (and every command that reads a spec) checks each block against it, so
    a misspelt key fails with its key path instead of being ignored; a block no plugin declares is
    an error too. `factory(config)` gets the checked block; the default returns it as it is.
    """

    kind: ClassVar[str] = "settings"
    label: ClassVar[str] = "settings block"

    factory: Callable[..., Any] | str = attrs.field(default=_settings_as_given, validator=_check_factory)


RECORD_TYPES: tuple[type[ComponentSpec], ...] = (
    TaskSourceSpec,
    EnvSpec,
    WorkflowSpec,
    ExplorerSpec,
    SummarizerSpec,
    TaskFilterSpec,
    MixerSpec,
    RewardSpec,
    AdvantageSpec,
    ExperienceStoreSpec,
    BackendSpec,
    VenvSpec,
    CommandSpec,
    SettingsSpec,
)
RECORD_TYPE_BY_KIND: dict[str, type[ComponentSpec]] = {cls.kind: cls for cls in RECORD_TYPES}
