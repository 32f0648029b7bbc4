"""Settings a valid spec makes that would not take effect are warned about before anything runs.

An env block whose `service` is the URL of a running environment service keeps only `name`,
`service` (and the run-side keys); the env's own keys stay here — the server was started with its
config. `beyondagent validate` (the real CLI, gymnasium's FrozenLake) names each such key.
"""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from beyondagent_core import pipeline

pytest.importorskip("beyondagent_plugin_gym")

SPEC = """
tasks:
  train: {name: gym_tasks, env: frozenlake, count: 2}
env: {name: frozenlake, service: "http://127.0.0.1:9", max_steps: 4, invalid_action_reward: -0.5}
backend: {name: export}
"""
PLUGINS = {"BEYONDAGENT_PLUGINS": "gym,mixers"}


def test_validate_names_env_keys_a_running_service_will_not_receive(cli, tmp_path) -> None:
    (tmp_path / "spec.yaml").write_text(SPEC)
    result = cli("validate", "spec.yaml", env=PLUGINS)
    assert result.code == 0, result.text  # a warning, not an error: the spec is valid
    assert "spec.settings_not_sent" in result.err
    assert "env.max_steps, env.invalid_action_reward set here are not sent to it" in result.err
    assert "--config max_steps=... invalid_action_reward=..." in result.err


@pytest.mark.beyondagent_plugins("gym", "mixers")
@pytest.mark.parametrize(("service", "warned"), [
    ("http://127.0.0.1:9", ["env.max_steps"]),
    ("https://envs.example:8443", ["env.max_steps"]),
    ("local", []),
    ("launch", []),  # a launched server is started with the env's keys
])
def test_only_a_url_service_leaves_env_keys_behind(plugin_manager, tmp_path, service, warned) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("service: \"http://127.0.0.1:9\"", f"service: {service!r}")
                    .replace(", invalid_action_reward: -0.5", ""))
    with capture_logs() as events:
        pipeline.prepare(spec, manager=plugin_manager)
    found = [event for event in events if event["event"] == "spec.settings_not_sent"]
    assert [event["keys"] for event in found] == ([warned] if warned else [])


@pytest.mark.beyondagent_plugins("gym", "mixers")
def test_a_url_service_with_only_the_run_side_keys_is_quiet(plugin_manager, tmp_path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace(", max_steps: 4, invalid_action_reward: -0.5", ""))
    with capture_logs() as events:
        pipeline.prepare(spec, manager=plugin_manager)
    assert not [event for event in events if event["event"] == "spec.settings_not_sent"]
