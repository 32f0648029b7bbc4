"""What `/create` and `/get_info` check first, on the real server:

- `env_type` names the served env with or without its plugin (`plugin/name` or `name`, on either
  side), and any other name is a 404;
- `/get_info` on an instance that does not exist is the unknown instance's 404, whatever method it
  names (a method no client may call included): a client must not read "the env lacks this method"
  when the instance is gone.
"""

from __future__ import annotations

import httpx
from envservice_testkit import running_server


def post(url: str, endpoint: str, **body) -> httpx.Response:
    full = {"env_type": None, "task_id": None, "instance_id": None, "messages": {}, "params": {}}
    full.update(body)
    return httpx.post(f"{url}/{endpoint}", json=full, timeout=30)


def test_env_type_may_name_the_env_with_or_without_its_plugin() -> None:
    with running_server(env_name="toy") as served:
        assert post(served.url, "create", env_type="tests/toy", task_id="t1").status_code == 200
        assert post(served.url, "get_env_profile", env_type="tests/toy").status_code == 200
    with running_server(env_name="tests/toy") as served:
        assert post(served.url, "create", env_type="toy", task_id="t1").status_code == 200
        assert post(served.url, "create", env_type="tests/toy", task_id="t2").status_code == 200
        other = post(served.url, "create", env_type="tests/frozenlake", task_id="t3")
        assert other.status_code == 404 and other.json()["code"] == "unknown_env"


def test_get_info_on_an_unknown_instance_is_that_instances_404_for_any_method() -> None:
    with running_server() as served:
        for method in ("describe_achieved", "close", "__class__"):
            reply = post(served.url, "get_info", instance_id="nope", params={"method": method})
            assert reply.status_code == 404 and reply.json()["code"] == "unknown_instance", (method, reply.text)
