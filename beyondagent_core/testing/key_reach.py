"""Every spec key a backend maps moves exactly its own target keys: the checks behind a reach table.

A backend that writes another framework's config (verl, trinity) maps our spec keys onto theirs. A
table test names, for each spec key, a value of its own, the context where it matters and the target
keys it must move; `moved_by` compares the mapping with and without it. A key the mapping ignores
moves nothing; a key read in another's place moves a target that is not its own. `unlisted_keys`
keeps the table complete: every field of the backend's config and of the spec's `algorithm` and
`model` sections (`model.lora` too) must be moved, refused or said to work elsewhere.

Subclass `KeyReachTable` (as the contract suites are subclassed) with the tables and a `mapped` fixture:

    class TestVerlKeys(KeyReachTable):
        CONFIG = VerlConfig
        MOVES = {"backend.lr": (0.001, {}, {"actor_rollout_ref.actor.optim.lr"}), ...}
        REFUSED = {"algorithm.sft": ({"data": "sft.jsonl"}, {}, "cannot run algorithm.sft"), ...}
        ELSEWHERE = {"backend.timeout_s": "how long the backend waits for verl's process", ...}

        @pytest.fixture
        def mapped(self, manager, tmp_path):  # target key -> value for the example spec with `settings`
            return lambda settings: verl_keys(prepared(EXAMPLE, settings, tmp_path, manager))
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from beyondagent_core.errors import SpecError
from beyondagent_core.pipeline import prepare
from beyondagent_core.plugins import PluginManager, Switches
from beyondagent_core.spec import CORE_SECTIONS, LoraSection, Spec

Mapping = Callable[[dict[str, Any]], dict[str, Any]]


def with_settings(data: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """A copy of spec `data` with each dotted key of `settings` set (missing sections made)."""
    data = copy.deepcopy(data)
    for dotted, value in settings.items():
        *parents, last = dotted.split(".")
        node = data
        for parent in parents:
            node = node.setdefault(parent, {})
        node[last] = value
    return data


def prepared(example: dict[str, Any], settings: dict[str, Any], tmp_path: Path, manager: PluginManager) -> Spec:
    """The spec `example` (a parsed YAML file, its profiles dropped) with `settings` set, prepared in `tmp_path`."""
    data = with_settings(example, settings)
    data["run"]["output_dir"] = str(tmp_path / "runs")
    data.pop("profiles", None)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return prepare(path, manager=manager).spec


def moved_by(mapped: Mapping, key: str, value: Any, context: dict[str, Any]) -> set[str]:
    """The target keys whose values differ between `context` and `context` with `key: value`."""
    before, after = mapped(context), mapped({**context, key: value})
    return {name for name in set(before) | set(after) if before.get(name) != after.get(name)}


def unlisted_keys(backend_config: type, tables: Iterable[str]) -> tuple[set[str], set[str]]:
    """(keys no table lists, table keys of the backend/algorithm/model sections that do not exist)."""
    keys = {f"backend.{field.name}" for field in attrs.fields(backend_config)}
    keys |= {f"{section}.{field.name}" for section in ("algorithm", "model")
             for field in attrs.fields(CORE_SECTIONS[section])}
    keys |= {f"model.lora.{field.name}" for field in attrs.fields(LoraSection)}
    listed = set(tables)
    return keys - listed, {key for key in listed if key.split(".")[0] in ("backend", "algorithm", "model")} - keys


class KeyReachTable:
    """The three checks over a backend's tables: each `MOVES` key moves exactly its targets, each `REFUSED`
    key is refused naming itself (its context alone accepted), and the tables list every key."""

    CONFIG: type
    MOVES: dict[str, tuple[Any, dict[str, Any], set[str]]] = {}  # key -> (value, context, the targets it moves)
    REFUSED: dict[str, tuple[Any, dict[str, Any], str]] = {}  # key -> (value, context, a fragment of the refusal)
    ELSEWHERE: dict[str, str] = {}  # key -> where it takes effect instead, and what test sees it

    def pytest_generate_tests(self, metafunc: Any) -> None:
        if "moved_key" in metafunc.fixturenames:
            metafunc.parametrize("moved_key", sorted(self.MOVES))
        if "refused_key" in metafunc.fixturenames:
            metafunc.parametrize("refused_key", sorted(self.REFUSED))

    @pytest.fixture(scope="class")
    @classmethod
    def manager(cls) -> PluginManager:
        """Every installed plugin, loaded once for the table."""
        loaded = PluginManager(Switches(autoload=True))
        loaded.load()
        return loaded

    @pytest.fixture
    def mapped(self) -> Mapping:
        raise pytest.UsageError(f"{type(self).__name__} must define the fixture `mapped`")

    def test_a_key_moves_its_targets_and_no_others(self, mapped: Mapping, moved_key: str) -> None:
        value, context, expected = self.MOVES[moved_key]
        moved = moved_by(mapped, moved_key, value, context)
        assert moved == expected, f"{moved_key}: {value!r} moved {sorted(moved)}"

    def test_a_key_the_backend_cannot_honour_is_refused_naming_it(self, mapped: Mapping, refused_key: str) -> None:
        value, context, reason = self.REFUSED[refused_key]
        mapped(context)  # the context alone is accepted
        with pytest.raises(SpecError) as refused:
            mapped({**context, refused_key: value})
        assert reason in str(refused.value) and refused_key.rsplit(".", 1)[-1] in str(refused.value)

    def test_every_key_is_moved_refused_or_said_to_work_elsewhere(self) -> None:
        """A key added to the backend's config or the algorithm/model sections must join one of the tables."""
        unlisted, unknown = unlisted_keys(self.CONFIG, [*self.MOVES, *self.REFUSED, *self.ELSEWHERE])
        assert (unlisted, unknown) == (set(), set()), "add the first to a table; the second are no keys"
