"""Every number a spec can set has both bounds, and the upper one says why (issue 36, item 4).

docs/security.md says every number is range-checked: this walks every numeric key of every
component's config — the core sections, the `llm` section, the blocks every slot shares, and each
installed plugin's config classes (components and `plugins.settings`), nested classes included —
and checks that its `number` validator has a lower and an upper bound with a reason, that the
default is in range, and that `validate`'s merge (`spec.structured`) refuses 1e23, NaN and
infinity, and -1 wherever it is below the lower bound. One parametrized case per key, no runs:
the whole file takes about a second.
"""

from __future__ import annotations

import math
import types
import typing
from typing import Any

import attrs
import pytest

from beyondagent_core.checks import MISSING, bounds_of
from beyondagent_core.errors import SpecError
from beyondagent_core.llm import LLMConfig
from beyondagent_core.plugins import PluginManager, Switches
from beyondagent_core.registry import Registry
from beyondagent_core.spec import CORE_SECTIONS, SLOTS, structured


def _unwrap(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1 else tp


def _roots() -> dict[type, str]:
    """Each config class a spec block is merged over, by the key path (or `kind name`) it sits at."""
    roots: dict[type, str] = {}
    for section, cls in CORE_SECTIONS.items():
        roots.setdefault(cls, section)
    roots.setdefault(LLMConfig, "llm")
    for slot in SLOTS:
        roots.setdefault(slot.block_cls, slot.key_path)
    manager = PluginManager(Switches(autoload=True, allow=set(), deny=set())).load()
    registry = Registry(manager)
    for kind in sorted({spec.kind for spec, _ in manager.components()}):
        for registration in registry.registrations(kind):
            cls = registration.spec.config_cls
            if cls is not None and attrs.has(cls):
                roots.setdefault(cls, f"{kind} {registration.qualified_name}")
    return roots


def _numeric_keys() -> list[Any]:
    """(root class, path of nested field names, field) for every int or float field, as pytest params; a
    nested class met under several roots (`LLMConfig` in a judge, a summarizer...) is tried under the first."""
    found = []
    tried: set[tuple[type, str]] = set()
    for root, where in _roots().items():
        stack: list[tuple[type, tuple[str, ...]]] = [(root, ())]
        seen: set[type] = set()
        while stack:
            cls, path = stack.pop()
            if cls in seen:
                continue
            seen.add(cls)
            hints = typing.get_type_hints(cls)
            for field in attrs.fields(cls):
                tp = _unwrap(hints[field.name])
                if isinstance(tp, type) and attrs.has(tp):
                    stack.append((tp, (*path, field.name)))
                elif tp in (int, float) and (cls, field.name) not in tried:
                    tried.add((cls, field.name))
                    key = ".".join((*path, field.name))
                    found.append(pytest.param(root, path, field, tp, id=f"{where}: {key}"))
    return found


NUMERIC_KEYS = _numeric_keys()


def _placeholder(cls: type) -> dict[str, Any]:
    """Values for `cls`'s required fields (and names left empty, such as a model's), so that only the field
    under test can be refused."""
    hints = typing.get_type_hints(cls)
    return {field.name: {int: 1, float: 1.0}.get(_unwrap(hints[field.name]), "x")
            for field in attrs.fields(cls) if field.default in (MISSING, "")}


def _block(root: type, path: tuple[str, ...], name: str, value: Any) -> dict[str, Any]:
    data = _placeholder(root)
    node, cls = data, root
    for part in path:
        cls = _unwrap(typing.get_type_hints(cls)[part])
        node = node.setdefault(part, _placeholder(cls))
    node[name] = value
    return data


def test_the_walk_finds_the_keys_of_the_core_and_of_the_plugins() -> None:
    ids = " ".join(param.id for param in NUMERIC_KEYS)
    assert "algorithm: group_size" in ids and "algorithm: kl_coef" in ids and "model.lora: rank" not in ids
    assert "model: lora.rank" in ids and "algorithm: overlong.buffer_len" in ids and "llm: max_tokens" in ids
    assert len(NUMERIC_KEYS) > 100, len(NUMERIC_KEYS)


@pytest.mark.parametrize(("root", "path", "field", "tp"), NUMERIC_KEYS)
def test_every_numeric_key_has_both_bounds_and_refuses_what_is_out_of_them(root: type, path: tuple[str, ...],
                                                                          field: attrs.Attribute, tp: type) -> None:
    key = ".".join((*path, field.name))
    bounds = bounds_of(field)
    assert bounds is not None, f"{key} has no number(...) validator"
    assert bounds.lower is not None and math.isfinite(bounds.lower), f"{key} has no lower bound"
    assert bounds.upper is not None and math.isfinite(bounds.upper), f"{key} has no upper bound"
    assert bounds.why.split(":")[0] in ("memory", "time", "meaning"), f"{key}: the upper bound says no why"
    if isinstance(field.default, (int, float)) and not isinstance(field.default, bool):
        assert bounds.admits(field.default), f"{key}'s default {field.default} is out of its own bounds"
    huge = 10**23 if tp is int else 1e23
    for bad in (huge, float("nan"), float("inf"), -1):
        if bad == -1 and bounds.admits(-1):
            continue
        with pytest.raises(SpecError) as refused:
            structured(root, _block(root, path, field.name, bad), "section", "the spec")
        assert f"section.{key}" in str(refused.value), str(refused.value)
        if bad is huge:  # the upper bound refused it, and said why
            assert bounds.why in str(refused.value), str(refused.value)
