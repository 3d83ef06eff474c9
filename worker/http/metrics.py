"""HTTP responses counted by route and status code: ``graphrag_http_responses_total{route, code}``.

A pure ASGI middleware outside every other one (the bearer gate included), so a refusal (401,
403), a body too large (413) and a server error (5xx) are counted like any answer. The ``route``
label is the template of the app's route that matches the request (``/notes/{note_id}/graph``),
never the path itself, and ``unmatched`` when none does: the label's values are bounded by the
app's routes, whatever clients send. A response that never started (the client went away, or the
app raised past Starlette's error middleware) counts as ``500``.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter
from starlette._utils import get_route_path
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from worker.http.front import Fronted

__all__ = ["ResponseCounter", "count_responses"]

UNMATCHED = "unmatched"


class ResponseCounter:
    """Counts each HTTP response of ``app`` in ``counter`` (labels ``route``, ``code``)."""

    def __init__(self, app: ASGIApp, *, counter: Counter, routes: Sequence[BaseRoute]) -> None:
        self.app, self.counter, self.routes = app, counter, routes
        #: the counter's children by (route, code): both bounded (the routes, HTTP's codes), and
        #: ``labels`` checks and converts its values on every call
        self._children: dict[tuple[str, int], Counter] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def noting(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            self._child(self.route_of(scope), status).inc()

    def _child(self, route: str, status: int) -> Counter:
        child = self._children.get((route, status))
        if child is None:
            child = self._children[route, status] = self.counter.labels(route, str(status))
        return child

    def route_of(self, scope: Scope) -> str:
        """The template of the first route matching the request's path (any method). A plain
        route is matched by its path pattern alone, as its own ``matches`` does before it looks
        at the method (without building the child scope: this runs on every request)."""
        path = get_route_path(scope)
        for route in self.routes:
            if isinstance(route, Route):
                if route.path_regex.match(path) is not None:
                    return route.path
            elif route.matches(scope)[0] is not Match.NONE:
                return str(getattr(route, "path", UNMATCHED))
        return UNMATCHED


def count_responses(app: Fronted, counter: Counter) -> Fronted:
    """``app`` with its responses counted in ``counter`` (service.metrics.http_responses)."""
    app.add_front(ResponseCounter, counter=counter, routes=app.router.routes)
    return app
