"""A lean HTTP/1.1 keep-alive transport for httpx, used by the client for plain `http://` services.

Why: on a small machine the client is the bottleneck of an episode loop. httpx's default
transport (httpcore over anyio) spends about a millisecond of CPU per request here, ten times
what the server needs to answer it; this transport writes each request in one `write` on an
asyncio protocol and reads a `Content-Length` (or chunked) reply, for a fraction of the cost.
httpx still does everything above the wire (timeouts, headers, the Response), and `https://`
keeps httpx's own transport.

Errors are httpx's (`ConnectError`, `ConnectTimeout`, `ReadTimeout`, `ReadError`,
`RemoteProtocolError`), so callers cannot tell the transports apart. A request sent on a
reused idle connection that the server had already closed (its keep-alive timeout) is sent
again once on a fresh connection: no byte of a reply came back, so the server never read it.
Idle connections are dropped after `idle_s` (below uvicorn's 5 s keep-alive).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

import httpx


class _Closed(Exception):
    """The connection ended before a full reply; `got_bytes` says whether any reply byte came."""

    def __init__(self, got_bytes: bool, exc: BaseException | None = None):
        super().__init__("the server closed the connection")
        self.got_bytes = got_bytes
        self.exc = exc


class _Connection(asyncio.Protocol):
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.error: BaseException | None = None
        self.idle_since = time.monotonic()

    # --- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed, self.error = True, exc
        self._wake()

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    # --- one request ------------------------------------------------------------------------

    async def _more(self, got: bool) -> None:
        if self.closed:
            raise _Closed(got, self.error)
        self.waiter = self.loop.create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    async def roundtrip(self, data: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
        """Send one request; return (status, headers, body, keep_alive)."""
        assert self.transport is not None
        self.transport.write(data)
        buffer = self.buffer
        while (end := buffer.find(b"\r\n\r\n")) < 0:
            await self._more(bool(buffer))
        head = bytes(buffer[:end]).split(b"\r\n")
        del buffer[: end + 4]
        version, _, rest = head[0].partition(b" ")
        try:
            status = int(rest[:3])
        except ValueError:
            raise httpx.RemoteProtocolError(f"bad status line {head[0]!r}") from None
        headers: list[tuple[bytes, bytes]] = []
        length: int | None = None
        chunked = False
        keep_alive = version == b"HTTP/1.1"
        for line in head[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip(), value.strip()
            lower = name.lower()
            if lower == b"content-length":
                length = int(value)
            elif lower == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif lower == b"connection":
                keep_alive = value.lower() != b"close" and (keep_alive or value.lower() == b"keep-alive")
            headers.append((name, value))
        if chunked:
            body = await self._chunked()
        elif length is not None:
            while len(buffer) < length:
                await self._more(True)
            body = bytes(buffer[:length])
            del buffer[:length]
        else:  # the body runs to the end of the connection
            while not self.closed:
                await self._more(True)
            body, keep_alive = bytes(buffer), False
            buffer.clear()
        return status, headers, body, keep_alive

    async def _chunked(self) -> bytes:
        buffer, parts = self.buffer, []
        while True:
            while (end := buffer.find(b"\r\n")) < 0:
                await self._more(True)
            size = int(bytes(buffer[:end]).split(b";")[0], 16)
            del buffer[: end + 2]
            while len(buffer) < size + 2:
                await self._more(True)
            if size == 0:
                while (end := buffer.find(b"\r\n")) != 0:  # trailers, then the blank line
                    if end < 0:
                        await self._more(True)
                    else:
                        del buffer[: end + 2]
                del buffer[:2]
                return b"".join(parts)
            parts.append(bytes(buffer[:size]))
            del buffer[: size + 2]

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class LeanTransport(httpx.AsyncBaseTransport):
    """Keep-alive HTTP/1.1 over asyncio protocols; `http://` only (one instance per event loop)."""

    def __init__(self, idle_s: float = 4.0):
        self.idle_s = idle_s
        self._idle: dict[tuple[str, int], deque[_Connection]] = {}
        self._all: set[_Connection] = set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"LeanTransport serves http:// only, not {request.url.scheme}://")
        timeouts = request.extensions.get("timeout", {})
        key = (request.url.host, request.url.port or 80)
        data = self._serialize(request, await request.aread())
        for _attempt in range(2):
            conn, reused = await self._acquire(key, timeouts.get("connect"))
            try:
                status, headers, body, keep_alive = await self._with_timeout(
                    conn.roundtrip(data), timeouts.get("read"), conn)
            except _Closed as closed:
                self._discard(conn)
                if reused and not closed.got_bytes:
                    continue  # a stale keep-alive connection: the server never read this request
                raise httpx.ReadError(f"the server closed the connection: {closed.exc or 'EOF'}",
                                      request=request) from None
            except BaseException:
                self._discard(conn)
                raise
            if keep_alive and not conn.closed:
                conn.idle_since = time.monotonic()
                self._idle.setdefault(key, deque()).append(conn)
            else:
                self._discard(conn)
            return httpx.Response(status, headers=headers, stream=httpx.ByteStream(body), request=request)
        raise httpx.ReadError("the server closed the connection twice", request=request)  # pragma: no cover

    async def aclose(self) -> None:
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()

    @staticmethod
    def _serialize(request: httpx.Request, body: bytes) -> bytes:
        target = request.url.raw_path
        lines = [request.method.encode(), b" ", target, b" HTTP/1.1\r\n"]
        has_length = False
        for name, value in request.headers.raw:
            if name.lower() == b"content-length":
                has_length = True
            if name.lower() == b"transfer-encoding":
                continue  # the body is sent whole, with its length
            lines += [name, b": ", value, b"\r\n"]
        if not has_length and (body or request.method in ("POST", "PUT", "PATCH")):
            lines += [b"content-length: ", str(len(body)).encode(), b"\r\n"]
        lines += [b"\r\n", body]
        return b"".join(lines)

    async def _acquire(self, key: tuple[str, int], connect_timeout: float | None) -> tuple[_Connection, bool]:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # most recently used first: the likeliest to be alive
            if not conn.closed and not conn.buffer and now - conn.idle_since < self.idle_s:
                return conn, True
            self._discard(conn)
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(lambda: _Connection(loop), *key),
                                             connect_timeout)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {key[0]}:{key[1]} timed out") from None
        except OSError as exc:
            raise httpx.ConnectError(f"cannot connect to {key[0]}:{key[1]}: {exc.strerror or exc}") from None
        self._all.add(conn)
        return conn, False

    async def _with_timeout(self, coro: Any, timeout: float | None, conn: _Connection) -> Any:
        if timeout is None:
            return await coro
        try:
            async with asyncio.timeout(timeout):  # a timer, not a task per request like wait_for
                return await coro
        except TimeoutError:
            raise httpx.ReadTimeout(f"no reply within {timeout:g}s") from None

    def _discard(self, conn: _Connection) -> None:
        conn.close()
        self._all.discard(conn)
