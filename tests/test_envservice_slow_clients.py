"""Slow clients against the real server on loopback, with raw sockets (beyondagent_core.envservice.slow_clients).

- half-sent headers: the connection is closed after `header_timeout`, while `/healthz` answers the
  whole time for others;
- headers in time but a body trickling in: 408 after `body_timeout`;
- more connections than `max_connections`: the request past the cap gets 503, not a hang;
- an honest keep-alive client making several requests on one connection is not cut.
"""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import httpx
from envservice_testkit import running_server


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
