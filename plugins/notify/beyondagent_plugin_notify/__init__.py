"""BeyondAgent notifications on the run lifecycle hooks: finished, failed, stalled (see README.md).

The hooks only record the run and start or reset its stall watchdog; messages go out through
`beyondagent_plugin_notify.sender`, which imports apprise only when there is something to send.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core import SettingsSpec, hookimpl
from beyondagent_plugin_notify.watch import NotifySettings, RunWatch, settings_of

__all__ = ["beyondagent_run_finished", "beyondagent_run_started", "beyondagent_settings", "beyondagent_step_finished"]

_watches: dict[str, RunWatch] = {}


@hookimpl
def beyondagent_settings() -> list[SettingsSpec]:
    return [SettingsSpec(name="notify", config_cls=NotifySettings,
                         summary="Where and when to send run notifications (urls, stall_minutes, events).")]


@hookimpl
def beyondagent_run_started(run: Any) -> None:
    settings = settings_of(run)
    if settings is None or not settings.urls:
        return
    _watches[str(run.run_dir)] = watch = RunWatch(run, settings)
    watch.start()


@hookimpl
def beyondagent_step_finished(run: Any, step: int, metrics: dict[str, Any]) -> None:
    watch = _watches.get(str(run.run_dir))
    if watch is not None:
        watch.step(step, metrics)


@hookimpl
def beyondagent_run_finished(run: Any, status: str, metrics: dict[str, Any]) -> None:
    watch = _watches.pop(str(run.run_dir), None)
    if watch is not None:
        watch.finish(status, metrics)
