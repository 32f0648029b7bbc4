"""The spec a backend hands its worker processes (verl's rollout workers, Trinity-RFT's runners).

Workers rebuild the run from a spec file; the secrets in it (`Spec.secrets`: values resolved from
environment variables, keys that name a secret) must not be written to that file. `worker_spec`
returns the resolved spec with each secret replaced by an OmegaConf `${oc.env:VAR}` reference and
the `{VAR: value}` environment the backend passes to the workers' processes:

    spec_dict, env = worker_spec(run.spec, "BEYONDAGENT_VERL_SECRET_{}")
"""

from __future__ import annotations

import copy
import re
from typing import Any


def worker_spec(spec: Any, var_format: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(the resolved spec, secrets as `${oc.env:...}`; the environment holding their values)."""
    resolved = copy.deepcopy(spec.resolved)
    env: dict[str, str] = {}
    for i, (path, value) in enumerate(secret_values(spec)):
        var = var_format.format(i)
        _set(resolved, path, "${oc.env:" + var + "}")
        env[var] = str(value)
    return resolved, env


def secret_values(spec: Any) -> list[tuple[str, Any]]:
    """Each secret's key path and value in the resolved spec, in a stable order."""
    found = []
    for path in sorted(spec.secrets):
        value = _get(spec.resolved, path)
        if isinstance(value, str):
            found.append((path, value))
    return found


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
