"""A first-party plugin's command typed without that plugin (`beyondagent view` without
beyondagent-plugin-view): the CLI says what to install, or why the installed plugin is not loaded.

The installed entry points are replaced by a list made here (`_entry_points`), so each case holds
whichever plugins this environment has.
"""

from __future__ import annotations

from importlib import metadata

import pytest

from beyondagent_core import cli, plugins


def entry_points(monkeypatch: pytest.MonkeyPatch, *points: metadata.EntryPoint) -> None:
    monkeypatch.delenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("BEYONDAGENT_PLUGINS", raising=False)
    monkeypatch.setattr(plugins, "_entry_points", lambda: list(points))


def view_entry_point(module: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name="view", value=module, group=plugins.ENTRY_POINT_GROUP)


def test_view_without_its_plugin_says_what_to_install(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    entry_points(monkeypatch)
    assert cli.main(["view", "runs/quickstart", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "`beyondagent view` comes with beyondagent-plugin-view" in err
    assert "hint: pip install beyondagent-plugin-view" in err
    assert cli.main(["verl", "setup"]) == 2 and "pip install beyondagent-plugin-verl" in capsys.readouterr().err
    assert cli.main(["model", "list"]) == 2
    assert "`beyondagent model` comes with beyondagent-plugin-torch" in capsys.readouterr().err


def test_a_disabled_or_broken_view_plugin_is_named_as_such(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    entry_points(monkeypatch, view_entry_point("no_such_module_for_view"))
    monkeypatch.setenv("BEYONDAGENT_DISABLED_PLUGINS", "view")
    assert cli.main(["view", "runs/quickstart"]) == 2
    assert "the plugin 'view' is disabled: disabled by BEYONDAGENT_DISABLED_PLUGINS" in capsys.readouterr().err
    monkeypatch.delenv("BEYONDAGENT_DISABLED_PLUGINS")
    assert cli.main(["view", "runs/quickstart"]) == 2
    err = capsys.readouterr().err
    assert "the plugin 'view' failed to load: import of 'no_such_module_for_view' failed" in err


def test_the_view_plugin_adds_the_command(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    pytest.importorskip("beyondagent_plugin_view", reason="pip install -e plugins/view")
    entry_points(monkeypatch, view_entry_point("beyondagent_plugin_view"))
    assert cli.main(["view", "/no/such/run", "--no-browser"]) == 2
    assert "RUN_DIR /no/such/run does not exist" in capsys.readouterr().err


def test_the_env_service_without_its_plugin_says_what_to_install(monkeypatch: pytest.MonkeyPatch, capsys,
                                                                 tmp_path) -> None:
    """`env serve` and a spec's `env.service: launch | URL` come with beyondagent-plugin-envservice: the
    command and the run both say so (the run before it builds anything)."""
    from beyondagent_core.context import RunContext, RunInfo
    from beyondagent_core.errors import PluginError
    from beyondagent_core.hookspecs import hookimpl
    from beyondagent_core.records import EnvSpec

    entry_points(monkeypatch)
    assert cli.main(["env", "serve", "--env", "frozenlake"]) == 2
    err = capsys.readouterr().err
    assert "`beyondagent env` comes with beyondagent-plugin-envservice" in err
    assert "hint: pip install beyondagent-plugin-envservice" in err

    class Envs:  # an env registered inline: the run gets as far as asking for its remote opener
        @hookimpl
        def beyondagent_envs(self):
            return [EnvSpec(name="line", factory="builtins:object", summary="an env")]

    entry_points(monkeypatch, metadata.EntryPoint(name="mixers", value="beyondagent_plugin_mixers",
                                                  group=plugins.ENTRY_POINT_GROUP))  # the spec's default mixer
    manager = plugins.PluginManager().load()
    manager.register(Envs(), "inline", distribution="inline-test-plugin", version="0")
    from beyondagent_core import pipeline

    spec = tmp_path / "spec.yaml"
    spec.write_text("run: {name: r, output_dir: runs}\ntasks: {train: {name: jsonl, path: t.jsonl}}\n"
                    "env: {name: line, service: launch}\nbackend: {name: export}\n")
    (tmp_path / "t.jsonl").write_text('{"task_id": "a", "env": "line"}\n')
    session = pipeline.prepare(spec, [], manager=manager)
    context = RunContext(spec=session.spec, manager=manager,
                         info=RunInfo(name="r", run_dir=tmp_path / "runs" / "r", seed=0, spec={}))
    with pytest.raises(PluginError, match="env.service: launch needs the environment service, which comes with "
                                          "beyondagent-plugin-envservice; the plugin beyondagent-plugin-envservice "
                                          "is not installed") as raised:
        context.env_opener()
    assert raised.value.hint.startswith("pip install beyondagent-plugin-envservice")
    assert raised.value.where.endswith("key env.service")
