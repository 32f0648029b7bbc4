"""`beyondagent validate` checks what `run` would trip on before anything runs (issue 24, part 6).

- each `plugins.settings.<plugin>` block against the schema its plugin declares (`SettingsSpec`):
  a misspelt key, or a block named after no installed plugin, fails with its key path;
- every component's factory is called (cheaply: no model is loaded), so a config the factory
  rejects fails at `validate`, not at `run`;
- a key set above the cap another key imposes (`workflow.max_turns` above `env.max_steps`)
  is a warning saying it changes nothing.

The real CLI in a subprocess, with the real notify and gym plugins (gymnasium's FrozenLake).
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from beyondagent_core import pipeline
from beyondagent_core.build_check import build_components, buildable
from beyondagent_core.errors import SpecError
from beyondagent_core.spec_caps import capped_settings

pytest.importorskip("beyondagent_plugin_gym")
pytest.importorskip("beyondagent_plugin_notify")

SPEC = """
tasks:
  train: {name: gym_tasks, env: frozenlake, count: 2, size: 2}
env: {name: frozenlake, max_steps: 6}
workflow: {name: react, max_turns: 6}
mixture: {name: original}
backend: {name: export}
"""
PLUGINS = {"BEYONDAGENT_PLUGINS": "gym,mixers,notify"}


def validate(cli, tmp_path, *overrides: str, spec: str = SPEC, plugins: dict[str, str] = PLUGINS):
    (tmp_path / "spec.yaml").write_text(spec)
    return cli("validate", "spec.yaml", *overrides, env=plugins)


# --- plugins.settings ---------------------------------------------------------------------------


def test_a_misspelt_key_in_a_plugins_settings_fails_with_its_key_path(cli, tmp_path) -> None:
    result = validate(cli, tmp_path, "plugins.settings.notify.stall_minuts=5")
    assert result.code == 2, result.text
    assert "unknown key plugins.settings.notify.stall_minuts" in result.err
    assert "did you mean plugins.settings.notify.stall_minutes?" in result.err
    assert "valid keys under plugins.settings.notify" in result.err and "beyondagent-plugin-notify" in result.err


def test_a_wrong_type_in_a_plugins_settings_fails_with_its_key_path(cli, tmp_path) -> None:
    result = validate(cli, tmp_path, "plugins.settings.notify.stall_minutes=soon")
    assert result.code == 2, result.text
    assert "plugins.settings.notify.stall_minutes must be" in result.err
    result = validate(cli, tmp_path, "plugins.settings.notify.events=[finished,exploded]")
    assert result.code == 2, result.text
    assert "plugins.settings.notify" in result.err and "exploded" in result.err


def test_a_settings_block_no_plugin_declares_fails_naming_the_closest(cli, tmp_path) -> None:
    result = validate(cli, tmp_path, "plugins.settings.notfy.urls=[json://localhost:9/x]")
    assert result.code == 2, result.text
    assert "unknown settings block 'notfy' (did you mean 'notify'?)" in result.err
    assert "key plugins.settings.notfy" in result.err


def test_good_settings_pass_one_url_or_a_list(cli, tmp_path) -> None:
    assert validate(cli, tmp_path, "plugins.settings.notify.urls=json://localhost:9/x").code == 0
    result = validate(cli, tmp_path, "plugins.settings.notify={urls: [json://localhost:9/x], stall_minutes: 0}")
    assert result.code == 0, result.text


def test_settings_of_a_disabled_plugin_are_not_checked(cli, tmp_path) -> None:
    result = validate(cli, tmp_path, "plugins.disable=[notify]", "plugins.settings.notify.stall_minuts=5")
    assert result.code == 0, result.text


def test_a_third_party_plugin_declares_its_settings(cli, tmp_path, make_dist) -> None:
    make_dist("beyondagent-plugin-pager", "pager", "beyondagent_plugin_pager", """
        import attrs
        from beyondagent_core import SettingsSpec, hookimpl

        @attrs.define
        class PagerSettings:
            channel: str = "ops"

        @hookimpl
        def beyondagent_settings():
            return [SettingsSpec(name="pager", config_cls=PagerSettings)]
    """)
    plugins = {"BEYONDAGENT_PLUGINS": "gym,mixers,pager"}
    assert validate(cli, tmp_path, "plugins.settings.pager.channel=dev", plugins=plugins).code == 0
    result = validate(cli, tmp_path, "plugins.settings.pager.chanel=dev", plugins=plugins)
    assert result.code == 2 and "unknown key plugins.settings.pager.chanel" in result.err, result.text


# --- building components --------------------------------------------------------------------------


def test_a_config_the_env_factory_rejects_fails_at_validate(cli, tmp_path) -> None:
    # Each key is valid alone; FrozenLake's factory rejects max_size below size.
    result = validate(cli, tmp_path, "env.size=6", "env.max_size=4")
    assert result.code == 2, result.text
    assert "invalid env: max_size must be an integer in [size (6)" in result.err
    assert "env (environment 'frozenlake' from beyondagent-plugin-gym" in result.err


def test_a_factory_that_raises_something_else_is_named_at_validate(cli, tmp_path, make_dist) -> None:
    make_dist("beyondagent-plugin-brittle", "brittle", "beyondagent_plugin_brittle", """
        from beyondagent_core import MixerSpec, hookimpl

        class Brittle:
            def __init__(self, config):
                raise RuntimeError("needs /etc/brittle.conf")

        @hookimpl
        def beyondagent_mixers():
            return [MixerSpec(name="brittle", factory=Brittle)]
    """)
    result = validate(cli, tmp_path, "mixture.name=brittle", plugins={"BEYONDAGENT_PLUGINS": "gym,mixers,brittle"})
    assert result.code != 0, result.text
    assert "building mixture failed: RuntimeError: needs /etc/brittle.conf" in result.err
    assert "mixer 'brittle' from beyondagent-plugin-brittle" in result.err


@pytest.mark.beyondagent_plugins("gym", "mixers")
def test_an_env_served_elsewhere_is_not_built_here(plugin_manager, tmp_path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("max_steps: 6}", 'max_steps: 6, service: "http://127.0.0.1:9"}'))
    session = pipeline.prepare(spec, manager=plugin_manager)
    assert "env" not in [c.key_path for c in buildable(session.spec)]
    assert build_components(session.spec) == ["tasks.train", "mixture", "workflow", "backend"]


@pytest.mark.beyondagent_plugins("gym", "mixers")
def test_build_components_raises_the_factorys_spec_error(plugin_manager, tmp_path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    # each number is in range (a range is checked when the spec is read); together they are not
    session = pipeline.prepare(spec, ["tasks.train.start=999999"], manager=plugin_manager)
    with pytest.raises(SpecError, match="invalid tasks.train: start \\+ count must be at most"):
        build_components(session.spec)


# --- caps -----------------------------------------------------------------------------------------


def test_an_override_above_a_cap_is_a_warning_that_it_changes_nothing(cli, tmp_path) -> None:
    result = validate(cli, tmp_path, "workflow.max_turns=12")
    assert result.code == 0, result.text
    assert "spec.setting_capped" in result.err
    assert "workflow.max_turns=12 changes nothing above env.max_steps=6" in result.err
    assert "the run is the same as with workflow.max_turns=6" in result.err
    assert "spec.setting_capped" not in validate(cli, tmp_path, "workflow.max_turns=6").err


@pytest.mark.beyondagent_plugins("gym", "mixers")
@pytest.mark.parametrize(("overrides", "capped"), [
    (["workflow.max_turns=7"], ["workflow.max_turns"]),
    (["workflow.max_turns=7", "env.max_steps=7"], []),
    (["workflow=null"], []),  # react's default 10 is above 6, but the user did not set it
    (["workflow.max_turns=7", "env.service=http://127.0.0.1:9"], []),  # that server has its own max_steps
])
def test_only_a_key_the_spec_sets_above_its_cap_is_reported(plugin_manager, tmp_path, overrides, capped) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    with capture_logs() as events:
        session = pipeline.prepare(spec, overrides, manager=plugin_manager)
    assert [e["key"] for e in events if e["event"] == "spec.setting_capped"] == capped
    data = {"workflow": {"max_turns": 7}} if capped else {}
    assert [cap.key for cap, _, _ in capped_settings(data, session.spec.resolved)] == capped
