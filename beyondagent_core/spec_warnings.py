"""Warnings about a valid spec: settings it makes that will not take effect.

`pipeline.prepare` (every command that reads a spec: `validate`, `run`, `explore`, ...) logs each
one as a warning event, so the user sees it before anything runs. Today: an env block whose
`service` is the URL of a running environment service, but which also sets the env's own keys —
that server was started with its own config and never receives them; and a key set above the cap another key
imposes (`beyondagent_core.spec_caps`: `workflow.max_turns` above `env.max_steps`...), which
changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from beyondagent_core.logs import get_logger
from beyondagent_core.spec_caps import capped_settings

if TYPE_CHECKING:
    from beyondagent_core.spec import Spec

log = get_logger("beyondagent.spec")


def unsent_env_keys(data: dict[str, Any], spec: Spec) -> list[str]:
    """The env keys `data` (the spec as written) sets that a running service at `env.service` will not get."""
    from beyondagent_core.spec import EnvBlock

    component = spec.component("env")
    block = data.get("env")
    if component is None or component.registration is None or not isinstance(block, dict):
        return []
    if not str(component.block.service).startswith(("http://", "https://")):
        return []  # `local` builds the env here; `launch` starts its server with these keys
    own = {field.name for field in attrs.fields(EnvBlock)}
    return [f"env.{key}" for key in block if key not in own]


def warn_ignored_settings(data: dict[str, Any], spec: Spec) -> list[str]:
    """Log a warning for each setting of `data` that will not take effect; returns the messages."""
    messages = []
    if keys := unsent_env_keys(data, spec):
        env = spec.component("env").name  # type: ignore[union-attr] - unsent keys imply an env
        message = (f"env.service is the URL of a running environment service, which keeps the config it was "
                   f"started with: {', '.join(keys)} set here {'is' if len(keys) == 1 else 'are'} not sent to it")
        hint = (f"start that server with them (`beyondagent env serve --env {env} --config "
                f"{' '.join(key.removeprefix('env.') + '=...' for key in keys)}`) and remove them here, "
                "or set env.service: launch to have the run start a server with them")
        log.warning("spec.settings_not_sent", message=message, keys=keys,
                    where=f"{spec.path or 'the spec'}, key env.service", hint=hint)
        messages.append(message)
    for cap, value, limit in capped_settings(data, spec.resolved, skip_limits=tuple(keys)):
        message = (f"{cap.key}={value} changes nothing above {cap.limit}={limit}: {cap.why}; "
                   f"the run is the same as with {cap.key}={limit}")
        log.warning("spec.setting_capped", message=message, key=cap.key, limit=cap.limit,
                    where=f"{spec.path or 'the spec'}, key {cap.key}",
                    hint=f"raise {cap.limit} too, or set {cap.key} to at most {limit}")
        messages.append(message)
    return messages
