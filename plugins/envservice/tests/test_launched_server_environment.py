"""A launched env server's environment (plugins/envservice/.../launch.py `_server_environment`)."""

from __future__ import annotations

import pytest
from beyondagent_plugin_envservice.launch import TOKEN_VAR, _server_environment


@pytest.mark.parametrize("switch", ["1", "TRUE", " yes ", "on"])
def test_autoload_off_without_a_plugin_list_still_loads_this_plugin(monkeypatch: pytest.MonkeyPatch,
                                                                    switch: str) -> None:
    monkeypatch.delenv("BEYONDAGENT_PLUGINS", raising=False)
    monkeypatch.setenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", switch)
    environment = _server_environment("tok-1")
    assert environment["BEYONDAGENT_PLUGINS"] == "envservice"
    assert environment[TOKEN_VAR] == "tok-1" and environment["PYTHONUNBUFFERED"] == "1"


def test_a_plugin_list_gets_this_plugin_and_autoload_on_sets_no_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEYONDAGENT_PLUGINS", " gym,math ")
    monkeypatch.delenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    assert _server_environment("t")["BEYONDAGENT_PLUGINS"] == "gym,math,envservice"
    monkeypatch.delenv("BEYONDAGENT_PLUGINS")
    monkeypatch.setenv("BEYONDAGENT_DISABLE_PLUGIN_AUTOLOAD", "0")
    assert "BEYONDAGENT_PLUGINS" not in _server_environment("t")


def test_a_server_in_an_envs_venv_gets_the_venvs_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """As every child in a venv (beyondagent_core.venvs.venv_environ): this interpreter's PYTHONPATH does
    not leak in, and byte-code is kept (the venv is installed uncompiled: with PYTHONDONTWRITEBYTECODE
    each launched server, and each process it spawns, compiled its modules again)."""
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    venv = tmp_path / "appworld-venv"
    environment = _server_environment("t", str(venv / "bin" / "python"))
    assert "PYTHONPATH" not in environment and "PYTHONDONTWRITEBYTECODE" not in environment
    assert environment["VIRTUAL_ENV"] == str(venv) and environment["PATH"].startswith(str(venv / "bin"))
    assert environment[TOKEN_VAR] == "t" and environment["PYTHONUNBUFFERED"] == "1"
    # in this interpreter (no venv of its own), the run's environment as it is
    assert _server_environment("t")["PYTHONPATH"] == "/somewhere/else"
