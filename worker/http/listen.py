"""``graphrag serve``'s listeners: one uvicorn server on one or two sockets.

The internal listener (``--port``) serves everything: the service's own paths with the shared
token, Doughnut's paths as ``GRAPHRAG_READER_AUTH`` says, ``/metrics``, ``/healthz`` and the
webhook. With ``GRAPHRAG_PUBLIC_PORT`` a second socket serves only Doughnut's paths with Doughnut's
credentials (worker.http.public): what a proxy in front of Doughnut points at, so that the shared
token, ``?viewer=`` and the metrics are never reachable from Doughnut's public address. Without it
one address serves everything, as a single host behind no proxy needs (the default: nothing to
configure, and nothing changes for a deployment that had one address).

One server and one event loop carry both (:class:`ByListener` picks the app by the port the
connection came in on), so they share the reader, its connections and its caches. Every
connection has a deadline for its request's head (worker.deadline).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from graphrag.core.errors import ConfigurationError
from worker.deadline import with_head_deadline

__all__ = ["ByListener", "Listeners", "bound", "serve"]


@dataclass(frozen=True)
class Listeners:
    """Where ``graphrag serve`` listens: the internal address, and the public one if any."""

    host: str
    port: int
    public_host: str | None = None
    public_port: int | None = None

    def __post_init__(self) -> None:
        if self.public_port is not None and self.public_port == self.port:
            raise ConfigurationError("GRAPHRAG_PUBLIC_PORT: the public listener needs a port of its "
                                     f"own, not the internal one ({self.port})")


class ByListener:
    """``public`` for connections to ``public_port``, ``internal`` for every other (and lifespan)."""

    def __init__(self, internal: ASGIApp, public: ASGIApp, public_port: int) -> None:
        self.internal, self.public, self.public_port = internal, public, public_port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server") or (None, None)
        if scope["type"] != "lifespan" and server[1] == self.public_port:
            await self.public(scope, receive, send)
        else:
            await self.internal(scope, receive, send)


def serve(app: ASGIApp, listeners: Listeners, *, header_timeout_s: float,
          log_level: str = "info", access_log: bool = True) -> None:
    """Run ``app`` (a :class:`ByListener` when there is a public port) until stopped."""
    server, sockets = bound(app, listeners, header_timeout_s=header_timeout_s, log_level=log_level,
                            access_log=access_log)
    server.run(sockets=sockets)


def bound(app: ASGIApp, listeners: Listeners, *, header_timeout_s: float,
          log_level: str = "info", access_log: bool = True,
          ) -> tuple[uvicorn.Server, list[socket.socket]]:
    """The server and its bound sockets, not yet serving (``server.run(sockets=...)``)."""
    protocol = with_head_deadline(header_timeout_s)
    config = uvicorn.Config(app, host=listeners.host, port=listeners.port, http=protocol,
                            log_level=log_level, access_log=access_log)
    sockets = [config.bind_socket()]
    if listeners.public_port is not None:
        public = uvicorn.Config(app, host=listeners.public_host or listeners.host,
                                port=listeners.public_port, http=protocol)
        sockets.append(public.bind_socket())
    return uvicorn.Server(config), sockets
