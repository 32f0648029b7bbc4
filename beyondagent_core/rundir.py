"""The run directory: `<output_dir>/<run name>/` and the files that explain a run.

`spec.resolved.yaml` (secrets redacted), `plugins.json` (which plugin provided each
component, and every plugin's state), `reproduce.json` (what runs it again: `reproduce.py`) and
`events.jsonl`; the backend adds its own files.
`--resume` continues in place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from beyondagent_core import reproduce
from beyondagent_core.errors import RunError, SpecError
from beyondagent_core.logs import get_logger
from beyondagent_core.plugins import PluginManager
from beyondagent_core.spec import Spec

log = get_logger("beyondagent.rundir")


def run_dir_of(spec: Spec) -> Path:
    return Path(spec.run.output_dir) / spec.run.name


def create_run_dir(spec: Spec, manager: PluginManager, *, resume: bool = False) -> Path:
    """Create the run directory (a second run of the same name shares it, and its explore cache).

    With `resume` the directory must exist: the backend continues what it holds.
    """
    run_dir = run_dir_of(spec)
    if resume:
        if not run_dir.is_dir():
            raise RunError(f"nothing to resume: {run_dir} does not exist",
                           where=f"{spec.path}, keys run.output_dir and run.name",
                           hint="run without --resume to start, or point run.name at the run to continue")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "spec.resolved.yaml").write_text(spec.redacted_yaml(), encoding="utf-8")
        (run_dir / "plugins.json").write_text(
            json.dumps(provenance(spec, manager), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        reproduce.write(run_dir, seed=spec.run.seed, packages=packages(manager), resume=resume)
    except OSError as exc:  # output_dir is a file, read-only, on a full disk...
        raise SpecError(f"cannot write the run directory {run_dir}: {exc.strerror or exc}",
                        where=f"{spec.path}, keys run.output_dir and run.name",
                        hint="point run.output_dir at a writable directory (it is created if missing)") from None
    return run_dir


def provenance(spec: Spec, manager: PluginManager) -> dict[str, Any]:
    """What provided each selected component, and the state of every plugin."""
    components: dict[str, Any] = {}
    for component in [*spec.components.values(), *spec.filters]:
        if component.registration is None:
            continue
        plugin = component.registration.plugin
        components[component.key_path] = {
            "kind": component.kind,
            "name": component.registration.spec.name,
            "plugin": plugin.name,
            "distribution": plugin.distribution,
            "version": plugin.version,
        }
    return {"components": components, "plugins": [record.to_json() for record in manager.records.values()]}


def packages(manager: PluginManager) -> dict[str, str | None]:
    """Every BeyondAgent distribution loaded (the core and each plugin's) and its version."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    try:
        out["beyondagent"] = version("beyondagent")
    except PackageNotFoundError:
        out["beyondagent"] = None
    for record in manager.records.values():
        if record.distribution:
            out[record.distribution] = record.version
    return out
