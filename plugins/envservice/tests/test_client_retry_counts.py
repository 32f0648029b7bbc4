"""How often the env service client sends an idempotent call, by the status it gets, and `RemoteEnv`'s
instance on a second reset and after close.

Written after the eighth audit, for the next audit's mutants in `client.py`: with `retries=2` a retryable
failure is sent exactly three times (1 + retries), a 5xx from 500 up and a 429 are retryable unless the
reply says otherwise, a 499 or a 400 is sent once; the error names the status and the 429's hint says
what to do. A `RemoteEnv` reset a second time releases its first instance before creating the next one,
and after `close()` it refuses every call, naming it.

`answering` (test_envservice_client.py) is a real loopback server with a canned reply; the toy env of
`envservice_testkit` runs in a real served pool.
"""

from __future__ import annotations

import asyncio

import pytest
from envservice_testkit import running_server
from test_envservice_client import answering

from beyondagent_plugin_envservice.client import ClientOptions, EnvServiceClient, EnvServiceError
from beyondagent_core.types import Task


@pytest.mark.parametrize(("status", "answer", "sent"), [
    (503, {"success": False, "error": "busy", "retryable": True}, 3),
    (500, {"success": False, "error": "a proxy's"}, 3),  # the lowest 5xx, no flag: retried
    (502, {"success": False, "error": "bad gateway"}, 3),
    (429, {"success": False, "error": "full"}, 3),
    (499, {"success": False, "error": "client closed"}, 1),  # just below 500: the caller's mistake
    (400, {"success": False, "error": "bad"}, 1),
    (400, {"success": False, "error": "bad", "retryable": True}, 3),  # the server's flag is the last word
    (503, {"success": False, "error": "gone for good", "retryable": False}, 1),
])
def test_an_idempotent_call_is_sent_once_plus_retries_only_when_retryable(status: int, answer: dict, sent: int) -> None:
    calls: list[str] = []
    with answering(status, answer, calls) as url:
        client = EnvServiceClient(url, options=ClientOptions(retries=2, backoff=0.0))

        async def main() -> EnvServiceError:
            with pytest.raises(EnvServiceError) as failed:
                await client.task_ids("toy")
            await client.aclose()
            return failed.value

        error = asyncio.run(main())
    assert calls == ["/get_env_profile"] * sent
    assert error.status == status and f"answered {status}: {answer['error']}" in error.message
    if status == 429:
        assert "raise its --max-instances" in error.hint


def test_a_second_reset_releases_the_first_instance_and_close_refuses_later_calls() -> None:
    with running_server() as served:
        client = EnvServiceClient(served.url, options=ClientOptions(retries=0))

        async def main() -> None:
            env = client.env("toy")
            with pytest.raises(RuntimeError, match=r"RemoteEnv.step\(\) before reset\(\)"):
                await env.step({"role": "assistant", "content": "x"})
            await env.reset(Task("first"))
            first = env.instance_id
            await env.reset(Task("second"))
            assert env.instance_id != first and list(served.pool.instances) == [env.instance_id]
            await env.close()
            await env.close()  # once only
            for call in (env.step({"role": "assistant", "content": "x"}), env.evaluate(), env.reset(Task("third"))):
                with pytest.raises(RuntimeError, match="called after close"):
                    await call
            await client.aclose()

        asyncio.run(main())
        stats = served.pool.stats()
        assert (stats["created"], stats["released"], stats["live"]) == (2, 2, 0)
