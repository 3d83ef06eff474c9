"""The MCP server over streamable HTTP: ``/mcp`` behind the reader's bearer token.

Stateless with JSON responses, so every request stands alone and several replicas can share one
address. The reader's own gate (:mod:`worker.bearer`) stands in front of the SDK's app with no
public path: every request, whatever its path, needs ``Bearer <GRAPHRAG_READER_TOKEN>``.
"""

from __future__ import annotations

from typing import Any

from mcp.server import Server
from starlette.types import ASGIApp

from worker.bearer import BearerGate

__all__ = ["http_app"]

MCP_PATH = "/mcp"


def http_app(server: Server[Any], *, token: str, host: str = "127.0.0.1") -> ASGIApp:
    """Streamable HTTP at ``/mcp`` behind the bearer token. Stateless with JSON responses: every
    request stands alone, so several replicas can share one address."""
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, stateless_http=False,
                                     json_response=True)
    return BearerGate(app, token=token)
