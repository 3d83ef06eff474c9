"""An app whose own layers (counting, the bearer gate, the hot read) run in front of FastAPI's.

FastAPI wraps every request in middleware of its own before any added with ``add_middleware``
(its server-error page, its telemetry switch, which reads the environment on each request, and
its body limit), and those cost a cache hit about a tenth of its time. A hot read answers in
front of them:

* **Same order as before.** :meth:`Fronted.add_front` stacks a layer outermost, as
  ``add_middleware`` does, so ``add_front(HotReads)``, ``add_front(BearerGate)``,
  ``add_front(ResponseCounter)`` count every answer, refuse without a token, then answer a hit,
  exactly as the same three added as middleware did.
* **Errors still never reach a user as a traceback.** What passes the front layers meets FastAPI's
  stack as before (its error handlers, the routes). The layers in front answer with fixed bodies
  (the gate's 401) or hand over to the app (the hot read passes anything it did not answer), and
  the hot read catches what its read raises (worker.http.hot).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["Fronted"]


class Fronted(FastAPI):
    """A FastAPI app with layers in front of its own middleware (module docstring)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._layers: list[tuple[Any, dict[str, Any]]] = []
        self._front: ASGIApp | None = None

    def add_front(self, layer: Any, **options: Any) -> None:
        """Put ``layer(app, **options)`` in front of everything added so far."""
        self._layers.append((layer, options))
        self._front = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._front is None:
            self._front = self._stacked()
        await self._front(scope, receive, send)

    def _stacked(self) -> ASGIApp:
        app: ASGIApp = self._fastapi
        for layer, options in self._layers:
            app = layer(app, **options)
        return app

    async def _fastapi(self, scope: Scope, receive: Receive, send: Send) -> None:
        await super().__call__(scope, receive, send)
