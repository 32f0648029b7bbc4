"""BeyondAgent core: the plugin contract, registry, spec, data model and CLI.

Plugin authors need only what this module exports: `hookimpl`, the record types they
return from hooks, and the data types their components exchange.
"""

__version__ = "0.1.0"

from beyondagent_core.hookspecs import hookimpl  # noqa: E402
from beyondagent_core.protocols import EnvReset, EnvStep  # noqa: E402
from beyondagent_core.records import (  # noqa: E402
    AdvantageSpec,
    BackendSpec,
    CommandSpec,
    EnvSpec,
    ExperienceStoreSpec,
    ExplorerSpec,
    MixerSpec,
    NoConfig,
    RewardSpec,
    SettingsSpec,
    SummarizerSpec,
    TaskFilterSpec,
    TaskSourceSpec,
    VenvSpec,
    WorkflowSpec,
)
from beyondagent_core.types import Reward, Task, Trajectory, Turn  # noqa: E402

__all__ = [
    "__version__", "hookimpl",
    "AdvantageSpec", "BackendSpec", "CommandSpec", "EnvSpec", "ExperienceStoreSpec", "ExplorerSpec",
    "MixerSpec", "NoConfig", "RewardSpec", "SettingsSpec",
    "SummarizerSpec", "TaskFilterSpec", "TaskSourceSpec", "VenvSpec", "WorkflowSpec",
    "EnvReset", "EnvStep", "Reward", "Task", "Trajectory", "Turn",
]
