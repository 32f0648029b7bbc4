"""What the plugins that serve HTTP on this machine share: a listening socket, and slow clients that
cannot hold a server (a deadline for each request's headers and a connection cap).

The env service (beyondagent-plugin-envservice), the gateway and the viewer serve through these;
they live in the core so that none of those plugins depends on another for them.

uvicorn times out idle keep-alive connections but not a request whose headers arrive a byte at
a time (slowloris): hundreds of such connections, opened before any token is checked, used to
stay forever and starve the file descriptors `/healthz` needs. `guarded_protocol(base, seconds)`
wraps uvicorn's HTTP protocol class (h11 or httptools) so that a connection whose request headers
are not complete `seconds` after it opened (or after its previous response) is closed. The body
has its own deadline in the app (`EnvService._body`, 408), and uvicorn's `limit_concurrency`
caps connections (503 past it). The auth check runs as soon as the headers are in, before the body
is read.

A slowloris attack closes hundreds of connections at once, so each close is a debug line only;
`SlowClients` counts them (`slow_clients_closed` in `/stats`) and logs at most one info line per
`interval` seconds saying how many it closed in that time.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

from beyondagent_core.logs import get_logger

log = get_logger("beyondagent.envservice")

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_MAX_CONNECTIONS = 1024
DRAIN_BYTES = 64 << 20  # an oversized body read and dropped before its 413, so the client sees the answer


class BodyTooLarge(Exception):
    """The request body is past the limit (the caller answers 413)."""


class BodyTimeout(Exception):
    """The request body did not arrive in time (the caller answers 408)."""


async def read_bounded_body(request: Any, *, limit: int, timeout: float) -> bytes:
    """A Starlette request's body, at most `limit` bytes, within `timeout` seconds (a body sent a byte
    at a time ends there). A larger body is read on, and thrown away, up to `DRAIN_BYTES` before
    `BodyTooLarge`, so a plain HTTP client that sends its whole body before reading gets the answer
    instead of a reset connection; past that the connection is cut. Shared by the env service and
    the gateway."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > max(limit, DRAIN_BYTES):
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max(limit, DRAIN_BYTES):
                    break
                if size <= limit:
                    chunks.append(chunk)
    except TimeoutError:
        raise BodyTimeout from None
    if size > limit:
        raise BodyTooLarge
    return b"".join(chunks)
SUMMARY_INTERVAL = 10.0


class SlowClients:
    """Slow clients closed: a count, a debug line each, at most one info line per `interval` seconds.

    Used on the event loop only (the protocol's timer callbacks), so it needs no lock. `name` is
    the server the events are named after (`<name>.slow_clients_closed`), `setting` the deadline's.
    """

    def __init__(self, interval: float = SUMMARY_INTERVAL, *, name: str = "envservice",
                 setting: str = "--header-timeout"):
        self.interval = interval
        self.name, self.setting = name, setting
        self.closed = 0
        self._unreported = 0
        self._summary: asyncio.TimerHandle | None = None

    def record(self, header_timeout: float) -> None:
        self.closed += 1
        self._unreported += 1
        log.debug(f"{self.name}.slow_client_closed", seconds=header_timeout)
        if self._summary is None:  # the first close of a burst: report the burst `interval` from now
            self._summary = asyncio.get_running_loop().call_later(self.interval, self.flush)

    def flush(self) -> None:
        """Log the closes not reported yet (at the interval's end, and at shutdown)."""
        if self._summary is not None:
            self._summary.cancel()
            self._summary = None
        if self._unreported:
            count, self._unreported = self._unreported, 0
            log.info(f"{self.name}.slow_clients_closed", closed=count, last_s=self.interval, total=self.closed,
                     why=f"no complete request headers within {self.setting}")


def no_delay(transport: Any) -> None:
    """Send small writes at once (TCP_NODELAY). uvicorn's h11 protocol writes a response's headers
    and body separately; without it the second write waits for the client's delayed ACK: 40 ms a
    request on Linux (measured: 44 ms per request, 3x fewer steps/s than with httptools)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def guarded_protocol(base: type[asyncio.Protocol], header_timeout: float,
                     slow_clients: SlowClients | None = None) -> type[asyncio.Protocol]:
    """`base` with a deadline on every request's headers (see the module docstring); `slow_clients`
    counts the connections it closes."""
    counter = slow_clients if slow_clients is not None else SlowClients()

    class HeaderDeadline(base):  # type: ignore[misc, valid-type]
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            no_delay(transport)
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._in_request():
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()  # the next request on this connection gets its own deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _in_request(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is not None and not cycle.response_complete

        def _arm(self) -> None:
            self._disarm()
            self._deadline = asyncio.get_running_loop().call_later(header_timeout, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if not self._in_request() and not self.transport.is_closing():
                counter.record(header_timeout)
                self.transport.close()

    HeaderDeadline.__name__ = HeaderDeadline.__qualname__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 picks a free port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
