"""Settings that a cap makes ineffective: a value set above the limit another setting imposes.

`beyondagent run spec.yaml workflow.max_turns=12` changes nothing when the env ends every
episode after `env.max_steps: 6` steps; the run would be the same as with 6. Each rule below
names the capped key, the key that caps it and why; `capped_settings` lists the rules a spec
breaks, and `spec_warnings` logs each as a warning before anything runs. Only a key the spec
(or an override) sets is reported: a default above a cap is not the user's doing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs


@attrs.frozen
class Cap:
    """`key` has no effect above `limit`'s value when `applies(resolved)`; `why` says what caps it."""

    key: str
    limit: str
    why: str
    applies: Callable[[dict[str, Any]], bool] = lambda resolved: True


def _react(resolved: dict[str, Any]) -> bool:
    workflow = resolved.get("workflow") or {}
    return workflow.get("name") in (None, "react")


def _torch(resolved: dict[str, Any]) -> bool:
    return (resolved.get("backend") or {}).get("name") == "torch"


CAPS: tuple[Cap, ...] = (
    Cap("workflow.max_turns", "env.max_steps",
        "every react turn is one env step, and the env ends the episode after env.max_steps steps", _react),
    Cap("backend.max_new_tokens", "backend.max_episode_tokens",
        "a turn's reply is cut to what is left of the episode's token budget", _torch),
)


def capped_settings(data: dict[str, Any], resolved: dict[str, Any], *,
                    skip_limits: tuple[str, ...] = ()) -> list[tuple[Cap, Any, Any]]:
    """(rule, value, limit) for each key `data` (the spec as written) sets above its cap in `resolved`.

    `skip_limits`: limits whose value here is not the one that applies (an env served elsewhere).
    """
    found = []
    for cap in CAPS:
        if cap.limit in skip_limits or _lookup(data, cap.key) is None or not cap.applies(resolved):
            continue
        value, limit = _lookup(resolved, cap.key), _lookup(resolved, cap.limit)
        if _number(value) and _number(limit) and value > limit:
            found.append((cap, value, limit))
    return found


def _lookup(data: Any, key_path: str) -> Any:
    for part in key_path.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
