"""The MCP server over streamable HTTP: ``/mcp`` behind the reader's bearer token.

Stateless with JSON responses, so every request stands alone and several replicas can share one
address. The gate is pure ASGI in front of the SDK's app and checks every request, whatever its path:
the ``Authorization`` header is compared with ``Bearer <GRAPHRAG_READER_TOKEN>`` as SHA-256 digests
in constant time (so not even the length leaks), a refused request gets 401 with
``WWW-Authenticate: Bearer``, a refused websocket is closed without being accepted, and only the
lifespan events pass unchecked. An empty token is refused at construction, never at a request.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from mcp.server import Server
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BearerGate", "http_app"]

MCP_PATH = "/mcp"


class BearerGate:
    """Pure ASGI: every HTTP request needs ``Authorization: Bearer <token>``, compared in constant time
    (as digests, so not even the length leaks); otherwise 401 with ``WWW-Authenticate: Bearer``."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        if not token:
            raise ValueError("the bearer token must not be empty")
        self.app, self.expected = app, hashlib.sha256(f"Bearer {token}".encode()).digest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        if scope["type"] == "lifespan" or hmac.compare_digest(hashlib.sha256(given).digest(),
                                                             self.expected):
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # a websocket: close without accepting
        body = b'{"error":"missing or wrong bearer token"}'
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})


def http_app(server: Server[Any], *, token: str, host: str = "127.0.0.1") -> ASGIApp:
    """Streamable HTTP at ``/mcp`` behind the bearer token. Stateless with JSON responses: every
    request stands alone, so several replicas can share one address."""
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, stateless_http=True,
                                     json_response=True)
    return BearerGate(app, token=token)
