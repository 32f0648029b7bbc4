"""A server's `"retryable": false` is the last word, even on a 5xx: the client sends an idempotent
call once and raises, rather than waiting out retries on an error that cannot go away (a proxy's 5xx
without the flag is retried: test_envservice_client.py)."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading

import pytest

from beyondagent_plugin_envservice.client import ClientOptions, EnvServiceClient, EnvServiceError


def test_an_idempotent_call_is_not_resent_when_the_server_says_not_retryable() -> None:
    calls = []

    class Broken(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls.append(self.path)
            body = json.dumps({"success": False, "error": "the env cannot list tasks", "code": "env_error",
                               "retryable": False}).encode()
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = EnvServiceClient(f"http://127.0.0.1:{server.server_address[1]}",
                                  options=ClientOptions(retries=3, backoff=0.01))

        async def main() -> None:
            with pytest.raises(EnvServiceError, match="500: the env cannot list tasks"):
                await client.task_ids("toy")
            await client.aclose()

        asyncio.run(main())
    finally:
        server.shutdown()
    assert calls == ["/get_env_profile"]
