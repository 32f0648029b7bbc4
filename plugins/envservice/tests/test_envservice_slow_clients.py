"""Slow clients against the real server on loopback, with raw sockets (beyondagent_core.serving).

- half-sent headers: the connection is closed after `header_timeout`, while `/healthz` answers the
  whole time for others;
- headers in time but a body trickling in: 408 after `body_timeout`;
- more connections than `max_connections`: the request past the cap gets 503, not a hang;
- an honest keep-alive client making several requests on one connection is not cut;
- each closed connection is a debug line, and a burst of them one info line per interval, with
  the count in `/stats`.
"""

from __future__ import annotations

import asyncio
import socket
import time
from urllib.parse import urlsplit

import httpx
from envservice_testkit import running_server, wait_until
from structlog.testing import capture_logs

from beyondagent_core.serving import SlowClients

PER_CONNECTION, SUMMARY = "envservice.slow_client_closed", "envservice.slow_clients_closed"


def address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname, parts.port


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """True when the server closes `sock` (EOF or reset) within `seconds`."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_half_sent_headers_are_closed_and_healthz_still_answers() -> None:
    with running_server(header_timeout=1.0) as served:
        slow = []
        for _ in range(50):
            sock = socket.create_connection(address(served.url))
            sock.sendall(b"POST /create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")  # never ends
            slow.append(sock)
        assert httpx.get(f"{served.url}/healthz", timeout=5).text == "OK"  # others are served meanwhile
        assert all(closed_within(sock, 20) for sock in slow)
        for sock in slow:
            sock.close()


def test_a_trickling_body_gets_408() -> None:
    with running_server(body_timeout=1.0) as served:
        sock = socket.create_connection(address(served.url))
        sock.sendall(b"POST /create HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{")
        sock.settimeout(30)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408")
        sock.close()


def test_past_the_connection_cap_requests_get_503() -> None:
    with running_server(max_connections=4, header_timeout=30.0) as served:
        idle = [socket.create_connection(address(served.url)) for _ in range(4)]
        time.sleep(0.2)
        reply = httpx.get(f"{served.url}/healthz", timeout=10)
        assert reply.status_code == 503
        for sock in idle:
            sock.close()


def test_keep_alive_requests_on_one_connection_are_not_cut() -> None:
    with running_server(header_timeout=0.5) as served, httpx.Client(base_url=served.url, timeout=10) as client:
        for _ in range(4):
            assert client.get("/healthz").text == "OK"
            time.sleep(0.2)  # each request comes well within its own deadline


def test_slow_clients_closed_are_counted_and_summed_up_in_one_info_line() -> None:
    with capture_logs() as events, running_server(header_timeout=0.5) as served:
        served.app.state.service.slow_clients.interval = 1.0
        slow = []
        for _ in range(40):
            sock = socket.create_connection(address(served.url))
            sock.sendall(b"GET /stats HTTP/1.1\r\nHost: x\r\n")  # never ends
            slow.append(sock)
        assert all(closed_within(sock, 20) for sock in slow)
        wait_until(lambda: any(event["event"] == SUMMARY for event in events))
        assert httpx.get(f"{served.url}/stats", timeout=5).json()["data"]["slow_clients_closed"] == 40
        for sock in slow:
            sock.close()
    per_connection = [event for event in events if event["event"] == PER_CONNECTION]
    summaries = [event for event in events if event["event"] == SUMMARY]
    assert len(per_connection) == 40 and {event["log_level"] for event in per_connection} == {"debug"}
    assert {event["log_level"] for event in summaries} == {"info"}
    assert len(summaries) <= 2 and sum(event["closed"] for event in summaries) == 40  # 40 closes, not 40 lines
    assert summaries[-1]["total"] == 40 and summaries[0]["last_s"] == 1.0


def test_at_most_one_summary_line_per_interval() -> None:
    async def scenario() -> list[dict]:
        slow_clients = SlowClients(interval=0.3)
        with capture_logs() as events:
            for _ in range(600):  # a slowloris burst
                slow_clients.record(10.0)
            assert not [event for event in events if event["event"] == SUMMARY]  # not before the interval ends
            await asyncio.sleep(0.5)
            slow_clients.record(10.0)
            slow_clients.record(10.0)
            slow_clients.flush()  # what the server does at shutdown
            slow_clients.flush()  # nothing left: no line
        return events

    events = asyncio.run(scenario())
    assert [event["closed"] for event in events if event["event"] == SUMMARY] == [600, 2]
    assert len([event for event in events if event["event"] == PER_CONNECTION]) == 602


def test_served_connections_send_small_writes_at_once() -> None:
    """TCP_NODELAY on each accepted connection: uvicorn's h11 protocol writes headers and body
    separately, and without it every response waited 40 ms for the client's delayed ACK."""
    import socket

    from beyondagent_core.serving import no_delay

    class Transport:
        def __init__(self, sock: socket.socket):
            self.sock = sock

        def get_extra_info(self, name: str):
            return self.sock if name == "socket" else None

    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    try:
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
        no_delay(Transport(accepted))
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        no_delay(Transport(None))  # a transport without a socket (a test double, a pipe): nothing to do
    finally:
        for sock in (accepted, client, listener):
            sock.close()
