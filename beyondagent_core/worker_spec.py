"""The spec a backend hands its worker processes (verl's rollout workers, Trinity-RFT's runners).

Workers rebuild the run from a spec file, and no secret may be written to that file: neither a
whole-value secret (`Spec.secrets`: values resolved from environment variables, keys that name a
secret) nor one inside a value, such as a URL's credentials (`http://user:pass@host`, `?api_key=`,
a webhook's path token, `#access_token=`) or a value this process remembers as secret. `worker_spec`
returns the resolved spec with each such value replaced whole by an OmegaConf `${oc.env:VAR}`
reference, and the `{VAR: value}` environment the backend passes to the workers' processes:

    spec_dict, env = worker_spec(run.spec, "BEYONDAGENT_VERL_SECRET_{}")

A value holds a secret when `secrets.redact` would change it: the test is the one every log line
and saved spec goes through, so what is masked there never reaches a worker's file either.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from beyondagent_core.secrets import redact

ENV_REFERENCE = "${oc.env:"


def worker_spec(spec: Any, var_format: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(the resolved spec, secrets as `${oc.env:...}`; the environment holding their values)."""
    resolved = copy.deepcopy(spec.resolved)
    env: dict[str, str] = {}

    def moved(value: str) -> str:
        var = var_format.format(len(env))
        env[var] = value
        return ENV_REFERENCE + var + "}"

    for path, value in secret_values(spec):
        _set(resolved, path, moved(str(value)))
    return _move_secret_strings(resolved, moved), env


def secret_values(spec: Any) -> list[tuple[str, Any]]:
    """Each whole-value secret's key path and value in the resolved spec, in a stable order."""
    found = []
    for path in sorted(spec.secrets):
        value = _get(spec.resolved, path)
        if isinstance(value, str):
            found.append((path, value))
    return found


def holds_secret(value: str) -> bool:
    """Whether `value` has a secret in it: a part `redact` masks (URL credentials, a token, a known secret)."""
    return not value.startswith(ENV_REFERENCE) and redact(value) != value


def _move_secret_strings(node: Any, moved: Any) -> Any:
    """`node` with every string that holds a secret replaced by `moved(string)`, in order."""
    if isinstance(node, dict):
        return {key: _move_secret_strings(value, moved) for key, value in node.items()}
    if isinstance(node, list):
        return [_move_secret_strings(value, moved) for value in node]
    if isinstance(node, str) and holds_secret(node):
        return moved(node)
    return node


def _parts(path: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"\.|\[(\d+)\]", path) if p]


def _get(node: Any, path: str) -> Any:
    for part in _parts(path):
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return None
    return node


def _set(node: Any, path: str, value: Any) -> None:
    *parents, last = _parts(path)
    for part in parents:
        node = node[part]
    node[last] = value
