"""The header deadline holds on a kept-alive connection too (beyondagent_core.serving): after a
response, the next request's headers must be complete within `header_timeout`, or the connection is
closed. uvicorn's own keep-alive timeout stops counting at the first byte, so without that deadline
a client that answers a response with half a request holds the connection forever."""

from __future__ import annotations

import socket

from envservice_testkit import running_server
from test_envservice_slow_clients import address, closed_within


def test_half_sent_headers_after_a_response_are_closed() -> None:
    with running_server(header_timeout=1.0) as served:
        sock = socket.create_connection(address(served.url))
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.settimeout(10)
            answer = b""
            while not answer.endswith(b"OK"):
                answer += sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200")
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the next request's headers never end
            assert closed_within(sock, 15)
        finally:
            sock.close()
        assert served.app.state.service.slow_clients.closed == 1
