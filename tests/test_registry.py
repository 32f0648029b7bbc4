"""Registry.resolve: unknown names, names two plugins provide, and `plugin/name`.

Plugins are inline objects registered on a manager with entry-point autoload off, so the
set of components is exactly what each test registers (plus the built-ins).
"""

from __future__ import annotations

import pytest

from beyondagent_core import EnvSpec, MixerSpec, hookimpl
from beyondagent_core.errors import AmbiguousComponentError, UnknownComponentError
from beyondagent_core.plugins import PluginManager, Switches
from beyondagent_core.registry import Registry

KEY = "spec.yaml, key env.name"


class Mixer:
    def __init__(self, config):
        pass

    def mix(self, original, synthetic, *, epoch, seed):
        return list(original)


class Provides:
    """An inline plugin providing mixers and envs by name."""

    def __init__(self, mixers=(), envs=()):
        self.mixers, self.envs = mixers, envs

    @hookimpl
    def beyondagent_mixers(self):
        return [MixerSpec(name=name, factory=Mixer) for name in self.mixers]

    @hookimpl
    def beyondagent_envs(self):
        return [EnvSpec(name=name, factory=dict) for name in self.envs]


def manager_with(*plugins: tuple[str, Provides], entry_points: bool = True) -> PluginManager:
    """Inline plugins on a manager with autoload off; `entry_points=False` skips `load()`, so
    not even the installed entry points are recorded (as disabled)."""
    manager = PluginManager(Switches(autoload=False))
    if entry_points:
        manager.load()
    for name, plugin in plugins:
        manager.register(plugin, name, distribution=f"beyondagent-plugin-{name}", version="1.0.0")
    return manager


def test_resolve_a_unique_name() -> None:
    registry = Registry(manager_with(("lake", Provides(envs=["frozen_lake"]))))
    registration = registry.resolve("env", "frozen_lake", key_path=KEY)
    assert registration.plugin.name == "lake"
    assert registration.spec.name == "frozen_lake" and registration.spec.kind == "env"
    assert registration.qualified_name == "lake/frozen_lake"
    assert registry.resolve("backend", "export", key_path=KEY).plugin.provider == "beyondagent 0.1.0 (builtin)"


def test_unknown_name_suggests_the_closest_and_the_package() -> None:
    registry = Registry(manager_with(("lake", Provides(envs=["frozen_lake", "taxi_v2"]))))
    with pytest.raises(UnknownComponentError) as info:
        registry.resolve("env", "frozenlake", key_path=KEY)
    error = info.value
    assert error.message == ("unknown environment 'frozenlake' (did you mean 'frozen_lake'?). "
                             "Available environments: frozen_lake, taxi_v2")
    assert error.where == KEY
    assert error.hint.startswith("pip install beyondagent-plugin-gym")
    assert f"  where: {KEY}" in str(error) and "  hint: pip install beyondagent-plugin-gym" in str(error)


def test_unknown_name_with_nothing_installed() -> None:
    registry = Registry(manager_with(entry_points=False))
    with pytest.raises(UnknownComponentError) as info:
        registry.resolve("env", "frozenlake", key_path=KEY)
    assert "did you mean" not in info.value.message
    assert info.value.message.endswith("Available environments: none installed")
    assert info.value.hint == "pip install beyondagent-plugin-gym"


@pytest.mark.parametrize(("kind", "name"), [("reward", "llm_judge"), ("summarizer", "llm"),
                                           ("task_filter", "feasibility")])
def test_the_llm_components_name_their_distribution(kind: str, name: str) -> None:
    registry = Registry(manager_with(entry_points=False))  # the core alone: builtin, no plugin-llm
    with pytest.raises(UnknownComponentError) as info:
        registry.resolve(kind, name, key_path=KEY)
    assert info.value.hint == "pip install beyondagent-plugin-llm"


def test_unknown_name_that_no_first_party_plugin_has_gets_a_generic_hint() -> None:
    registry = Registry(manager_with(entry_points=False))
    with pytest.raises(UnknownComponentError) as info:
        registry.resolve("mixer", "zzz_custom", key_path="k")
    assert "pip install beyondagent-plugin-<x>" in info.value.hint
    assert "`beyondagent plugins` lists what is installed" in info.value.hint


def test_unknown_name_names_disabled_and_broken_plugins() -> None:
    # Autoload off: every installed entry point (mixers at least) is recorded as disabled.
    class Flaky:
        @hookimpl
        def beyondagent_mixers(self):
            raise ImportError("needs libratio")

    manager = manager_with()
    manager.register(Flaky(), "flaky")
    registry = Registry(manager)
    with pytest.raises(UnknownComponentError) as info:
        registry.resolve("mixer", "ratio", key_path="spec.yaml, key mixture.name")
    hint = info.value.hint
    assert hint.startswith("pip install beyondagent-plugin-mixers")
    assert "these plugins are disabled: " in hint
    disabled = hint.split("these plugins are disabled: ", 1)[1].split(", ")
    assert "mixers" in disabled
    assert ("these plugins failed to load and may provide it: "
            "flaky (hook beyondagent_mixers raised ImportError: needs libratio)") in hint


def test_conflicts_list_every_provider() -> None:
    manager = manager_with(
        ("first", Provides(mixers=["dup", "only_first"], envs=["shared"])),
        ("second", Provides(mixers=["dup"])),
        ("third", Provides(mixers=["shared"])),  # same name, other kind: no conflict
    )
    registry = Registry(manager)
    assert registry.conflicts() == {
        "mixer": {"dup": ["beyondagent-plugin-first 1.0.0 (first)", "beyondagent-plugin-second 1.0.0 (second)"]},
    }
    assert registry.names("mixer") == ["dup", "only_first", "shared"]
    assert [reg.qualified_name for reg in registry.registrations("mixer")] == [
        "first/dup", "second/dup", "first/only_first", "third/shared"]
    assert registry.resolve("env", "shared", key_path=KEY).plugin.name == "first"
    assert registry.resolve("mixer", "shared", key_path=KEY).plugin.name == "third"


def test_an_ambiguous_name_is_never_resolved_by_load_order() -> None:
    registry = Registry(manager_with(("first", Provides(mixers=["dup"])), ("second", Provides(mixers=["dup"]))))
    with pytest.raises(AmbiguousComponentError) as info:
        registry.resolve("mixer", "dup", key_path="spec.yaml, key mixture.name")
    error = info.value
    assert error.message == ("mixer 'dup' is provided by 2 plugins: beyondagent-plugin-first 1.0.0 (first); "
                             "beyondagent-plugin-second 1.0.0 (second)")
    assert error.where == "spec.yaml, key mixture.name"
    assert "pick one with 'first/dup' or 'second/dup'" in error.hint


def test_plugin_slash_name_picks_one_provider() -> None:
    registry = Registry(manager_with(("first", Provides(mixers=["dup"])), ("second", Provides(mixers=["dup"]))))
    for plugin in ("first", "second"):
        registration = registry.resolve("mixer", f"{plugin}/dup", key_path="k")
        assert registration.plugin.name == plugin
        assert registration.plugin.distribution == f"beyondagent-plugin-{plugin}"
        assert registration.spec.name == "dup"
    # Also for a name only one plugin provides.
    assert registry.resolve("backend", "builtin/export", key_path="k").spec.name == "export"


def test_plugin_slash_name_with_the_wrong_plugin() -> None:
    registry = Registry(manager_with(("first", Provides(mixers=["dup"])), ("second", Provides(mixers=["dup"]))))
    with pytest.raises(UnknownComponentError) as info:
        registry.resolve("mixer", "third/dup", key_path="spec.yaml, key mixture.name")
    error = info.value
    assert error.message == "plugin 'third' provides no mixer named 'dup'"
    assert error.where == "spec.yaml, key mixture.name"
    assert "mixers named 'dup' come from: first/dup, second/dup" in error.hint

    with pytest.raises(UnknownComponentError) as info:
        registry.resolve("mixer", "first/nothing", key_path="k")
    assert "mixers named 'nothing' come from: none" in info.value.hint
    # The plugin exists, but the name is of another kind.
    with pytest.raises(UnknownComponentError, match="plugin 'builtin' provides no environment named 'export'"):
        registry.resolve("env", "builtin/export", key_path="k")


def test_components_of_broken_and_disabled_plugins_are_not_registered() -> None:
    class Raises:
        @hookimpl
        def beyondagent_mixers(self):
            raise RuntimeError("nope")

        @hookimpl
        def beyondagent_envs(self):
            return [EnvSpec(name="from_broken", factory=dict)]

    manager = manager_with(("ok", Provides(envs=["fine"])))
    record = manager.register(Raises(), "broken")
    assert record.status == "error"
    registry = Registry(manager)
    assert registry.names("env") == ["fine"]
    with pytest.raises(UnknownComponentError) as info:
        registry.resolve("env", "from_broken", key_path="k")
    assert "broken (hook beyondagent_mixers raised RuntimeError: nope)" in info.value.hint
