"""The bearer gate in front of the HTTP reader and the MCP server (one gate, two apps).

Pure ASGI, so it sees every request before any routing: a path that matches no route needs the
token too, and an unauthenticated client learns nothing about what exists (401 before 404). The
``Authorization`` header is compared with ``Bearer <token>`` as SHA-256 digests in constant time, so
not even the token's length leaks. A refused request gets 401 with ``WWW-Authenticate: Bearer`` and
``{"error": "missing or wrong bearer token"}``; a refused websocket is closed without being
accepted. Only the lifespan events, the ``public`` paths (health, metrics, the signed webhook, the
API's description) and the ``open_paths`` (a pattern: Doughnut's own context paths, which check
Doughnut's user tokens themselves, worker.http.doughnut_paths) pass unchecked; with no token at all
(``GRAPHRAG_READER_AUTH=doughnut``) nothing else passes. An empty token is refused when the gate is
built, never at a request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BearerGate", "carries", "digest_of"]

_REFUSED = b'{"error":"missing or wrong bearer token"}'


class BearerGate:
    """Lets a request through to ``app`` when it carries ``Authorization: Bearer <token>`` or its
    path is one of ``public`` (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, token: str | None, public: Iterable[str] = (),
                 open_paths: str | None = None) -> None:
        if token is not None and not token:
            raise ValueError("the bearer token must not be empty")
        self.app, self.public = app, frozenset(public)
        self.open = None if open_paths is None else re.compile(open_paths)
        self.expected = None if token is None else digest_of(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._passes(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_REFUSED)).encode()),
                (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": _REFUSED})
        # a websocket: closed without being accepted

    def _passes(self, scope: Scope) -> bool:
        path = scope.get("path")
        if scope["type"] == "lifespan" or path in self.public:
            return True
        if self.open is not None and scope["type"] == "http" and self.open.fullmatch(path or ""):
            return True
        if self.expected is None:
            return False
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        return carries(given, self.expected)


def digest_of(token: str) -> bytes:
    """What an ``Authorization`` header carrying ``token`` digests to (compared by :func:`carries`)."""
    return hashlib.sha256(f"Bearer {token}".encode()).digest()


def carries(authorization: bytes, expected: bytes) -> bool:
    """Whether the header's SHA-256 digest is ``expected``, compared in constant time."""
    return hmac.compare_digest(hashlib.sha256(authorization).digest(), expected)
