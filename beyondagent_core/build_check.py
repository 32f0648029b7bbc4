"""Building a spec's components without running anything: what `beyondagent validate` adds.

Validation checks each block against its schema; a factory may still reject the config (a
value out of range for that env, a file that is not there, a missing optional dependency).
`build_components` calls every selected component's factory once, so those errors appear at
`validate` rather than minutes into `run`. Factories are cheap by contract: they keep their
config and load models, open stores and connect lazily. An env is built only where the run
would build it (`env.service: local`); one served elsewhere is built by its server.
"""

from __future__ import annotations

from typing import Any

from beyondagent_core.errors import BeyondAgentError, PluginError
from beyondagent_core.spec import Component, Spec


def buildable(spec: Spec, *, envs: bool = True) -> list[Component]:
    """The components of `spec` a run builds in this process, in spec order (`envs` False: no env)."""
    selected = [c for c in [*spec.components.values(), *spec.filters] if c.registration is not None]
    return [c for c in selected if c.kind != "env" or (envs and _env_is_local(c))]


def build_components(spec: Spec, *, envs: bool = True) -> list[str]:
    """Build each of `buildable(spec, envs=envs)` once (an env is closed again); their key paths.

    Raises the factory's own `BeyondAgentError` (a `ValueError` is a `SpecError` naming the
    block), or a `PluginError` naming the component for anything else it raises.
    """
    built = []
    for component in buildable(spec, envs=envs):
        try:
            obj = component.create()
        except BeyondAgentError:
            raise
        except Exception as exc:  # noqa: BLE001 - a factory's own bug or a missing file: name the component
            raise PluginError(f"building {component.key_path} failed: {type(exc).__name__}: {exc}",
                              where=component.described,
                              hint=f"check the values under {component.key_path}; if they are right, "
                                   f"report this to {component.registration.plugin.provider}") from exc
        if component.kind == "env":
            _close(obj)
        built.append(component.key_path)
    return built


def _env_is_local(component: Component) -> bool:
    registered = component.registration.spec if component.registration is not None else None
    return component.block.service == "local" and not getattr(registered, "venv", None)


def _close(env: Any) -> None:
    close = getattr(env, "close", None)
    if callable(close):
        close()
