"""Compatibility: the server driven exactly as AgentEvolver's `env_service/env_client.py` drives it.

Their client posts with `requests.post(url, json=data)` where `data` always has the five keys
`env_type, task_id, instance_id, messages, params` (`messages` and `params` default to `{}`,
the others may be None); it reads `r["data"]`, `data["info"]["instance_id"]`, `resp["success"]`,
and calls `raise_for_status()`. The env is the gym plugin's real FrozenLake.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests
from envservice_testkit import running_server

from beyondagent_plugin_envservice.command import env_factory

pytestmark = pytest.mark.beyondagent_plugins("gym")


def make_request(base_url: str, endpoint: str, env_type: str = "default", task_id: str | None = None,
                 instance_id: str | None = None, messages: dict | None = None,
                 params: dict | None = None) -> dict[str, Any]:
    """AgentEvolver's `EnvClient._make_request`, minus its logging and retry wrapper."""
    url = f"{base_url.rstrip('/')}/{endpoint.lstrip('/')}"
    data = {
        "env_type": env_type,
        "task_id": task_id,
        "instance_id": instance_id,
        "messages": messages or {},
        "params": params or {},
    }
    response = requests.post(url, json=data, timeout=30)
    response.raise_for_status()
    return response.json()


def test_agentevolver_client_flow(plugin_manager) -> None:
    name, factory = env_factory("frozenlake", {}, manager=plugin_manager)
    with running_server(factory, env_name=name) as served:
        base = served.url
        # get_env_profile(env_type, split="train")
        response = make_request(base, "/get_env_profile", env_type="frozenlake", params={"split": "train"})
        task_ids = response["data"]
        assert task_ids[:2] == ["frozenlake-train-0", "frozenlake-train-1"] and len(task_ids) == 100

        # create_instance(env_type, task_id) with no instance_id: the server makes one
        init = make_request(base, "create", env_type="frozenlake", task_id=task_ids[0])["data"]
        instance_id = init["info"]["instance_id"]
        assert instance_id and init["info"]["task_id"] == task_ids[0]
        assert [m["role"] for m in init["state"]] == ["system", "user"]
        assert init["reward"] == 0 and init["is_terminated"] is False

        # get_tools_info(instance_id) with empty messages/params
        info = make_request(base, "get_info", instance_id=instance_id)["data"]
        assert info["instance_id"] == instance_id

        # step(instance_id, action): messages is the assistant message
        action = {"role": "assistant", "content": "Action: right"}
        result = make_request(base, "step", instance_id=instance_id, messages=action)["data"]
        assert set(result) == {"state", "reward", "is_terminated", "info"}
        assert result["state"][0]["role"] == "user" and isinstance(result["reward"], float)

        # evaluate(instance_id) -> resp.get("data", 0.0) is the score, a float
        score = make_request(base, "evaluate", instance_id=instance_id).get("data", 0.0)
        assert isinstance(score, float)

        # release_instance(instance_id) -> resp.get("success", False)
        assert make_request(base, "release", instance_id=instance_id).get("success", False) is True
        assert make_request(base, "release", instance_id=instance_id).get("success", False) is False

        # their client's own instance ids work too (it sends instance_id when it has one)
        init = make_request(base, "create", env_type="frozenlake", task_id="frozenlake-val-4",
                            instance_id="ae_1700000000_abcd1234")["data"]
        assert init["info"]["instance_id"] == "ae_1700000000_abcd1234"
        make_request(base, "release", instance_id="ae_1700000000_abcd1234")


def test_errors_look_like_fastapi_http_exceptions(plugin_manager) -> None:
    """FastAPI puts the message in `detail`; ours is there too, as one line."""
    name, factory = env_factory("frozenlake", {}, manager=plugin_manager)
    with running_server(factory, env_name=name) as served:
        response = requests.post(f"{served.url}/step", json={
            "env_type": "default", "task_id": None, "instance_id": "gone", "messages": {}, "params": {}})
        assert response.status_code == 404
        with pytest.raises(requests.HTTPError):
            response.raise_for_status()
        assert response.json()["detail"].startswith("unknown instance 'gone'")
        response = requests.post(f"{served.url}/create", json={
            "env_type": "frozenlake", "task_id": None, "instance_id": None, "messages": {}, "params": {}})
        assert response.status_code == 400 and response.json()["detail"] == "task_id is required"
