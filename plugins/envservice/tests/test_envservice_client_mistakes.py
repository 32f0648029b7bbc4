"""A client's mistakes get 4xx answers that say what was wrong, from the real server on loopback.

- an env that rejects its input (bad task metadata, an action it cannot take) raises ValueError:
  400 `bad_input`, and the instance stays usable — an env's other exceptions stay 500s (its bug);
- a step after a step that ended the episode: 409 `episode_finished`, without calling the env;
- a body over the limit sent by a plain HTTP client that writes it all before reading (as
  `http.client` does): 413 with the reason, not a reset connection. Real gymnasium FrozenLake
  stands in for "bad metadata".
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import httpx
import pytest
from envservice_testkit import running_server

from beyondagent_core.types import Task

ACTION = {"role": "assistant", "content": "go"}


def post(url: str, endpoint: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/{endpoint}", json=body, timeout=30)


def test_an_action_the_env_rejects_is_400_and_the_instance_goes_on() -> None:
    with running_server() as served:
        task = Task("t", metadata={"reject": True}).to_dict()
        created = post(served.url, "create", env_type="toy", task_id="t", params={"task": task})
        instance = created.json()["data"]["info"]["instance_id"]
        reply = post(served.url, "step", instance_id=instance, messages=ACTION)
        assert reply.status_code == 400 and reply.json()["code"] == "bad_input"
        assert "cannot take 'go'" in reply.json()["error"]
        assert post(served.url, "evaluate", instance_id=instance).status_code == 200


def test_a_step_after_the_episode_ended_is_409() -> None:
    with running_server() as served:
        instance = post(served.url, "create", env_type="toy", task_id="t").json()["data"]["info"]["instance_id"]
        replies = [post(served.url, "step", instance_id=instance, messages=ACTION) for _ in range(3)]
        assert [r.json()["data"]["is_terminated"] for r in replies] == [False, False, True]
        late = post(served.url, "step", instance_id=instance, messages=ACTION)
        assert late.status_code == 409 and late.json()["code"] == "episode_finished"
        assert served.pool.stats()["env_errors"] == 0
        assert post(served.url, "evaluate", instance_id=instance).json()["data"] == 3.0  # three steps counted


def test_bad_task_metadata_of_a_real_env_is_400() -> None:
    pytest.importorskip("beyondagent_plugin_gym")
    from beyondagent_plugin_gym.config import FrozenLakeConfig
    from beyondagent_plugin_gym.frozenlake import FrozenLake

    with running_server(lambda: FrozenLake(FrozenLakeConfig()), env_name="frozenlake") as served:
        task = Task("bad", env="frozenlake", metadata={"p": "lots", "size": 4}).to_dict()
        reply = post(served.url, "create", env_type="frozenlake", task_id="bad", params={"task": task})
        assert reply.status_code == 400 and reply.json()["code"] == "bad_input"
        assert "metadata" in reply.json()["error"] or "'p'" in reply.json()["error"]
        assert served.pool.stats()["live"] == 0


def test_an_oversized_body_from_a_plain_client_gets_413() -> None:
    with running_server(max_body_bytes=1024 * 1024) as served:
        parts = urlsplit(served.url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        body = json.dumps({"env_type": "toy", "task_id": "x" * (20 * 1024 * 1024)}).encode()
        connection.request("POST", "/create", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 413
        assert json.loads(response.read())["code"] == "too_large"
        connection.close()
