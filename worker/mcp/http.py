"""The MCP server over streamable HTTP: ``/mcp`` behind the reader's bearer token.

JSON responses. A client on the current protocol (2026-07-28) sends self-contained requests, so
several replicas can share one address (its subscriptions too: a ``subscriptions/listen`` stream
is one request). A handshake-era client (up to 2025-11-25) gets a session (``Mcp-Session-Id``),
kept in this process, because ``resources/subscribe`` needs one: route those clients to one replica
(sticky sessions); after a restart their session is unknown (404) and they start a new one.

The reader's own gate (:mod:`worker.gate`) stands in front of the SDK's app with no public path:
every request, whatever its path, needs ``Bearer <GRAPHRAG_READER_TOKEN>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server import Server
from starlette.types import ASGIApp

from worker.gate import BearerGate

__all__ = ["SessionLimits", "http_app"]

MCP_PATH = "/mcp"


@dataclass(frozen=True)
class SessionLimits:
    """Handshake-era sessions held at once (``GRAPHRAG_MCP_MAX_SESSIONS``; a new one past it is
    refused) and how long one lives without a request (``GRAPHRAG_MCP_SESSION_IDLE_S``): a client
    that leaves without ending its session leaves nothing behind for longer than that."""

    max_sessions: int = 1_000
    idle_s: float = 1_800.0


DEFAULT_SESSIONS = SessionLimits()


def http_app(server: Server[Any], *, token: str, host: str = "127.0.0.1",
             sessions: SessionLimits = DEFAULT_SESSIONS) -> ASGIApp:
    """Streamable HTTP at ``/mcp`` behind the bearer token, JSON responses; sessions for
    handshake-era clients only (module docstring)."""
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, stateless_http=False,
                                     json_response=True, max_sessions=sessions.max_sessions,
                                     session_idle_timeout=sessions.idle_s)
    return BearerGate(app, token=token)
