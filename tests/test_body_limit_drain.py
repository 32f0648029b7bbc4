"""`read_bounded_body` around its two limits: the caller's `limit` and the drain (`DRAIN_BYTES`).

A declared Content-Length is refused before reading only past the larger of the two (a body
declared long but sent short is read); a limit above the drain raises the drain with it; a body
sent slower than `timeout` is a `BodyTimeout`. On real Starlette requests, over the ASGI receive
channel `test_serving_body_limit.py` builds.
"""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request
from test_serving_body_limit import read, starlette_request

from beyondagent_core.serving import DRAIN_BYTES, BodyTimeout, BodyTooLarge, read_bounded_body


@pytest.mark.parametrize(("limit", "length", "chunks", "expected"), [
    (10, DRAIN_BYTES, [b"short"], b"short"),              # declared exactly the drain: read, not refused
    (10, 11, [b"0123456789"], b"0123456789"),            # declared past the limit, sent within it: read
    (DRAIN_BYTES + 10, DRAIN_BYTES + 10, [b"x"], b"x"),   # a limit above the drain raises the drain
    (10, None, [b"0123456789", b""], b"0123456789"),      # an empty last chunk adds nothing
])
def test_a_declared_length_is_refused_only_past_the_larger_limit(limit: int, length: int | None,
                                                                  chunks: list[bytes], expected: bytes) -> None:
    assert read(chunks, limit=limit, length=length) == expected


def test_a_body_past_the_limit_within_the_drain_is_refused_after_reading() -> None:
    with pytest.raises(BodyTooLarge):
        read([b"0123456789", b"a"], limit=10, length=11)


def test_a_body_that_never_arrives_is_a_timeout() -> None:
    async def run() -> None:
        never = asyncio.Event()

        async def receive() -> dict:
            await never.wait()  # a client that sent its headers and nothing more
            return {"type": "http.request", "body": b"", "more_body": False}

        request = Request({"type": "http", "method": "POST", "path": "/step", "headers": []}, receive)
        await read_bounded_body(request, limit=10, timeout=0.01)

    with pytest.raises(BodyTimeout):
        asyncio.run(run())
    assert starlette_request([b"x"]).method == "POST"  # the shared helper builds the same kind of request
