"""A deadline for a request's head on the service's own listeners (graphrag serve, graphrag mcp).

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive``, but once a client has sent
the first byte of a request nothing bounds how long it may take to send the rest of the head: one
header line every few seconds keeps a connection (and its memory) forever, a slow-loris attack on a
listener that has no proxy in front. :class:`HeadDeadline` is uvicorn's httptools protocol with one
timer more: armed when a connection opens and when a request's first byte arrives, disarmed when the
head is complete; when it fires before, the connection is closed. A body is not bounded by it (the
webhook's body is bounded in size, and the app reads it as it streams).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HeadDeadline", "with_head_deadline"]


class HeadDeadline(HttpToolsProtocol):
    """httptools' protocol, closing a connection whose request head takes longer than
    ``head_timeout_s`` (set on the subclass :func:`with_head_deadline` makes)."""

    head_timeout_s: float = 10.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def with_head_deadline(seconds: float) -> type[HeadDeadline]:
    """The protocol class for ``uvicorn.Config(http=...)`` with a ``seconds`` head deadline."""
    return type("HeadDeadline", (HeadDeadline,), {"head_timeout_s": float(seconds)})
