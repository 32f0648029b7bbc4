"""A backend's native config keys: dotted overrides that remember the spec key each came from.

A backend that runs another framework (verl, Trinity-RFT) maps our spec onto that framework's
config as a list of `Override(key, value, origin)`, then appends the user's native block
(`backend.verl:`, `backend.trinity:`) flattened with `flatten`. `origin` lets an error the
framework raises about a key name the spec key the user wrote. `apply_overrides` sets them on an
OmegaConf tree (the framework's composed config or its structured schema), where an unknown key
is an `UnknownKey` with the closest keys that exist; it runs wherever OmegaConf is (the main
environment or a backend's own venv), with nothing else imported.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs


@attrs.frozen
class Override:
    """Native key `key` set to `value`; `origin` is the spec key it comes from (for errors)."""

    key: str
    value: Any
    origin: str

    def as_list(self) -> list[Any]:
        return [self.key, self.value, self.origin]


class UnknownKey(KeyError):
    """A native key the framework's config does not have (`suggestions`: the closest that exist)."""

    def __init__(self, message: str, *, key: str, origin: str | None, suggestions: list[str]):
        super().__init__(message)
        self.message, self.key, self.origin, self.suggestions = message, key, origin, suggestions

    def __str__(self) -> str:
        return self.message


class BadValue(ValueError):
    """A native key that exists but would not take the value."""

    def __init__(self, message: str, *, key: str, origin: str | None):
        super().__init__(message)
        self.key, self.origin = key, origin


def flatten(block: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{a: {b: 1}, "c.d": 2}` -> `{"a.b": 1, "c.d": 2}` (a `+` prefix, Hydra's 'add a key', is kept)."""
    flat: dict[str, Any] = {}
    for key, value in block.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and not str(key).startswith("+"):
            flat.update(flatten(value, f"{dotted}."))
        else:
            flat[dotted] = plain(value)
    return flat


def plain(value: Any) -> Any:
    """OmegaConf containers as plain dicts and lists; anything else as it is."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def apply_overrides(cfg: Any, overrides: Sequence[Sequence[Any]], *, framework: str, structured: bool = False) -> None:
    """Set each `[key, value, origin]` on the OmegaConf tree `cfg`. A key that does not exist is an
    `UnknownKey` (unless it starts with `+`, or its parent is a mapping the framework leaves empty
    for keys of the user's choosing); a value the key's type refuses is a `BadValue`.

    `structured`: `cfg` is a dataclass schema (`OmegaConf.structured`, e.g. Trinity-RFT's
    `Config`): a mapping or list value is merged into its typed node, as the framework's own YAML
    loader merges a file, and a key inside it that the dataclass lacks is refused too. Otherwise
    (a composed Hydra config, e.g. verl's) a value replaces the node as it is."""
    from omegaconf import DictConfig, OmegaConf

    for key, value, origin in overrides:
        add = key.startswith("+")
        key = key.lstrip("+")
        if not exists(cfg, key) and not add:
            parent = key.rpartition(".")[0]
            parent_node = OmegaConf.select(cfg, parent, default=None, throw_on_missing=False) if parent else None
            if not (isinstance(parent_node, DictConfig) and len(parent_node) == 0):
                raise UnknownKey(f"{framework} has no key {key!r}", key=key, origin=origin,
                                 suggestions=suggest(cfg, key))
        try:
            if structured:
                OmegaConf.update(cfg, key, value, merge=True)
            else:
                with _open_struct(cfg):
                    OmegaConf.update(cfg, key, value, merge=False, force_add=True)
        except Exception as exc:  # noqa: BLE001 - omegaconf raises several types: report verbatim
            raise BadValue(f"{framework} key {key!r} cannot be set to {value!r}: {exc}", key=key,
                           origin=origin) from None


def exists(cfg: Any, key: str) -> bool:
    """Whether dotted `key` names a node of `cfg` (a `???` value counts)."""
    from omegaconf import DictConfig

    node = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or part not in node.keys():  # noqa: SIM118 - `in node` is False for ???
            return False
        node = node._get_node(part)
    return True


def suggest(cfg: Any, key: str) -> list[str]:
    """The keys closest to `key` under its deepest existing parent."""
    from omegaconf import DictConfig, OmegaConf

    parent, _, leaf = key.rpartition(".")
    while parent and not exists(cfg, parent):
        parent, _, leaf = parent.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None, throw_on_missing=False) if parent else cfg
    siblings = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []  # noqa: SIM118
    close = difflib.get_close_matches(leaf, siblings, n=3, cutoff=0.6)
    return [f"{parent}.{name}" if parent else name for name in close]


@contextlib.contextmanager
def _open_struct(cfg: Any) -> Iterator[None]:
    from omegaconf import OmegaConf

    OmegaConf.set_struct(cfg, False)
    try:
        yield
    finally:
        OmegaConf.set_struct(cfg, True)
