"""`read_bounded_body`'s limit boundary (beyondagent_core/serving.py), on real Starlette requests."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request

from beyondagent_core.serving import DRAIN_BYTES, BodyTooLarge, read_bounded_body


def starlette_request(chunks: list[bytes], length: int | None = None) -> Request:
    """A real Starlette request over an ASGI receive channel that sends `chunks` as the body."""
    messages = [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
                for i, chunk in enumerate(chunks)] or [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict:
        return messages.pop(0)

    headers = [] if length is None else [(b"content-length", str(length).encode())]
    return Request({"type": "http", "method": "POST", "path": "/step", "headers": headers}, receive)


def read(chunks: list[bytes], limit: int, length: int | None = None) -> bytes:
    return asyncio.run(read_bounded_body(starlette_request(chunks, length), limit=limit, timeout=60))


def test_a_body_of_exactly_the_limit_is_read_whole_and_one_byte_more_is_refused() -> None:
    assert read([b"12345", b"67890"], limit=10) == b"1234567890"
    assert read([b"1234567890"], limit=10, length=10) == b"1234567890"
    with pytest.raises(BodyTooLarge):
        read([b"12345", b"678901"], limit=10)
    assert read([], limit=0) == b""


def test_a_declared_length_past_the_drain_is_refused_before_reading() -> None:
    with pytest.raises(BodyTooLarge):
        read([b"x"], limit=10, length=DRAIN_BYTES + 1)
