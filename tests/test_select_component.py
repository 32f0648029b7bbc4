"""`select_component` (tests and tools build one component with it): an unknown kind is a usage error
that lists the kinds a spec can select, with the closest one first."""

from __future__ import annotations

import pytest

from beyondagent_core.errors import SpecError
from beyondagent_core.registry import Registry
from beyondagent_core.spec import SELECTABLE_KINDS, select_component


def test_an_unknown_kind_lists_the_valid_kinds(plugin_manager) -> None:
    with pytest.raises(SpecError) as info:
        select_component(Registry(plugin_manager), "explorers", {"name": "random"}, key_path="explore")
    error = info.value
    assert error.message.startswith("unknown component kind 'explorers' (did you mean 'explorer'?)")
    assert "valid kinds: advantage, backend, env, experience_store, explorer, mixer, reward, summarizer, " \
           "task_filter, task_source, workflow" in error.message
    assert error.where == "select_component(kind='explorers'), for explore"


def test_the_valid_kinds_are_those_a_spec_selects() -> None:
    assert "task_filter" in SELECTABLE_KINDS and "command" not in SELECTABLE_KINDS and "venv" not in SELECTABLE_KINDS


@pytest.mark.beyondagent_plugins("mixers")
def test_a_valid_kind_still_builds(plugin_manager) -> None:
    component = select_component(Registry(plugin_manager), "mixer", {"name": "ratio"}, key_path="mixture")
    assert component.kind == "mixer" and component.name == "ratio"
