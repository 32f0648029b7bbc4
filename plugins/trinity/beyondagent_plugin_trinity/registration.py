"""Our Workflow, ADVANTAGE_FN and MONITOR in Trinity-RFT's own registries, under the name `beyondagent`.

`register()` is called by `trinity_plugin/beyondagent.py`, which trinity's plugin loader imports in
each of its processes (explorer, trainer, workflow runners) when `TRINITY_PLUGIN_DIRS` names that
folder, as the backend's launcher sets it; and by `compose.py` before trinity validates the
config. trinity's loader only logs a failed plugin, so `status()` checks the registration and the
launcher refuses to start without it. Nothing is copied into trinity's site-packages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

NAME = "beyondagent"
PLUGIN_DIR = Path(__file__).resolve().parent / "trinity_plugin"
TARGETS = {"workflow": "beyondagent_plugin_trinity.trinity_workflow.BeyondAgentWorkflow",
           "advantage_fn": "beyondagent_plugin_trinity.trinity_advantage.BeyondAgentAdvantage",
           "monitor": "beyondagent_plugin_trinity.trinity_monitor.BeyondAgentMonitor"}


def register() -> None:
    """Add `beyondagent` to trinity's WORKFLOWS, ADVANTAGE_FN and MONITOR (once per process)."""
    from trinity.algorithm import ADVANTAGE_FN
    from trinity.common.workflows import WORKFLOWS
    from trinity.utils.monitor import MONITOR

    from beyondagent_plugin_trinity.trinity_advantage import BeyondAgentAdvantage
    from beyondagent_plugin_trinity.trinity_monitor import BeyondAgentMonitor
    from beyondagent_plugin_trinity.trinity_workflow import BeyondAgentWorkflow

    for registry, cls in ((WORKFLOWS, BeyondAgentWorkflow), (ADVANTAGE_FN, BeyondAgentAdvantage),
                          (MONITOR, BeyondAgentMonitor)):
        if registry.modules.get(NAME) is not cls:
            registry.register_module(NAME, cls)


def status() -> dict[str, Any]:
    """What trinity's registries resolve `beyondagent` to, after trinity's own plugin loader ran."""
    import os

    from trinity.algorithm import ADVANTAGE_FN
    from trinity.common.constants import PLUGIN_DIRS_ENV_VAR
    from trinity.common.workflows import WORKFLOWS
    from trinity.utils.monitor import MONITOR
    from trinity.utils.plugin_loader import load_plugins

    os.environ[PLUGIN_DIRS_ENV_VAR] = str(PLUGIN_DIR)
    error = None
    try:
        load_plugins()
    except Exception as exc:  # noqa: BLE001 - said in the answer
        error = f"{type(exc).__name__}: {exc}"
    found = {}
    for kind, registry in (("workflow", WORKFLOWS), ("advantage_fn", ADVANTAGE_FN), ("monitor", MONITOR)):
        cls = registry.modules.get(NAME)
        found[kind] = f"{cls.__module__}.{cls.__qualname__}" if cls is not None else None
    ok = found == TARGETS
    if not ok and error is None:
        error = f"trinity's plugin loader did not register them from {PLUGIN_DIR} (its log says why)"
    return {"registered": ok, "targets": found, "error": error, "plugin_dir": str(PLUGIN_DIR)}
