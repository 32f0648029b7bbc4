"""Who may use the viewer: without a token, only requests that name a loopback host; with one, the token.

Without a token (the default, on a loopback address) a request whose `Host` is not a loopback name
(`localhost`, any address in 127.0.0.0/8, `[::1]`) gets a 400: a web page cannot reach the viewer
through DNS rebinding. With a token, every request needs it: `Authorization: Bearer <token>`,
`?token=<token>` once, or the cookie that answer sets. The token is any text of at least
`MIN_TOKEN_CHARS` characters, compared as UTF-8 bytes in constant time (a header's bytes as sent).
The cookie is the viewer's own: its name carries the port the viewer listens on (two viewers on
one host do not overwrite each other's), and it holds an HMAC of the token, not the token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from typing import Any

from starlette.datastructures import Headers, MutableHeaders, QueryParams
from starlette.requests import cookie_parser
from starlette.responses import PlainTextResponse

MIN_TOKEN_CHARS = 16
COOKIE_PREFIX = "beyondagent_view_"


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.1, 127.0.0.2, ::1, [::1])."""
    name = host.strip()
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The host of a `Host` header, without its port (`[::1]:8080` -> `::1`)."""
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def check_token(token: str) -> str:
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"the token has {len(token)} characters; it needs at least {MIN_TOKEN_CHARS}")
    return token


def cookie_name(scope: dict[str, Any]) -> str:
    server = scope.get("server")
    return f"{COOKIE_PREFIX}{server[1] if server and server[1] is not None else 'socket'}"


class Gate:
    """ASGI middleware: the host check without a token, the token check with one."""

    def __init__(self, app: Any, token: str | None = None):
        self.app = app
        self.token = None if token is None else check_token(token).encode("utf-8")
        self.cookie = None if token is None else hmac.new(self.token, b"beyondagent view cookie",
                                                          hashlib.sha256).hexdigest()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.token is None:
            if is_loopback(host_name(headers.get("host", ""))):
                await self.app(scope, receive, send)
            else:
                await PlainTextResponse("Invalid host header: without a token the viewer answers only requests to a "
                                        "loopback name (127.0.0.1, localhost, [::1])", 400)(scope, receive, send)
            return
        name = cookie_name(scope)
        by_query = self._matches(QueryParams(scope.get("query_string", b"")).get("token"), "utf-8")
        header = headers.get("authorization", "")
        bearer = header[7:] if header[:7].lower() == "bearer " else None
        cookie = cookie_parser(headers.get("cookie", "")).get(name, "").encode("latin-1", "replace")
        if not (by_query or self._matches(bearer, "latin-1") or hmac.compare_digest(cookie, self.cookie.encode())):
            await PlainTextResponse("missing or wrong token: open the URL with ?token=<token> (printed at start) or "
                                    "send 'Authorization: Bearer <token>'", 401,
                                    headers={"www-authenticate": "Bearer"})(scope, receive, send)
            return
        if not by_query:
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append(
                    "set-cookie", f"{name}={self.cookie}; Path=/; HttpOnly; SameSite=Strict")
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _matches(self, given: str | None, encoding: str) -> bool:
        """`given` (a header's text is latin-1 of the bytes sent; a query's is UTF-8) is the token."""
        if given is None or self.token is None:
            return False
        try:
            raw = given.encode(encoding)
        except UnicodeEncodeError:
            return False
        return hmac.compare_digest(raw, self.token)
