"""Doughnut's own context paths on the HTTP reader, in the three modes of ``GRAPHRAG_READER_AUTH``.

``GET /api/notes/{note}/graph?tokenLimit=N`` and ``/api/notes/{note}/ai-context-markdown``:

* ``shared`` (the default): behind the service's bearer gate, with its one reader token, answered
  in the notebook owner's view (``?viewer=`` for another user), errors in the service's own shape;
* ``doughnut``: as Doughnut answers them. The bearer token is one of Doughnut's own access tokens
  (``user_token``, service.users), the answer is that user's view or Doughnut's refusal, in
  Doughnut's order and with Doughnut's bodies (service.doughnut_api, service.doughnut_errors); the
  service's own paths keep the shared token;
* ``both``: the shared token reads as in ``shared`` (the main app, ``graphrag mcp``); any other
  bearer, or none, as in ``doughnut``.

The shared token is compared as the gate compares it (worker.gate: SHA-256 digests, constant time).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Query
from fastapi import Request as HttpRequest
from fastapi.responses import Response

from service.doughnut_api import DoughnutRead, Refusal, answer, cached_answer
from service.doughnut_errors import body_of
from service.reader import Served, SnapshotReader
from service.sessions import Viewers
from worker.gate import carries, digest_of

__all__ = ["AUTH_MODES", "GRAPH", "DoughnutAuth", "DoughnutQuery", "install"]

AUTH_MODES = ("shared", "doughnut", "both")
#: the paths a Doughnut user's token reaches (the gate lets them through in doughnut/both)
PATHS = r"/api/notes/[^/]+/(graph|ai-context-markdown)"
#: Doughnut's JSON path, the note's id captured (the hot read's: worker.http.hot)
GRAPH = r"/api/notes/([^/]+)/graph"


@dataclass
class DoughnutQuery:
    """Doughnut's parameters (its own paths choose the strategy of the database's layout)."""

    token_limit: Annotated[str | None, Query(alias="tokenLimit")] = None
    seed: Annotated[str | None, Query()] = None
    viewer: Annotated[str | None, Query(description="user id whose view (shared mode only)")] = None
    authorization: Annotated[str | None, Header()] = None
    cookie: Annotated[str | None, Header(description="Doughnut's web session")] = None


@dataclass(frozen=True)
class DoughnutAuth:
    """How Doughnut's paths authenticate: ``mode`` (:data:`AUTH_MODES`), Doughnut's users (their
    tokens and web sessions: ``viewers``, doughnut/both) and the service's shared token
    (shared/both)."""

    mode: str
    viewers: Viewers | None = None
    shared_token: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in AUTH_MODES:
            raise ValueError(f"GRAPHRAG_READER_AUTH must be one of {', '.join(AUTH_MODES)}")
        if self.mode != "shared" and self.viewers is None:
            raise ValueError("Doughnut's users need their tokens (and sessions)")

    def public(self) -> DoughnutAuth:
        """The same users on the public listener: Doughnut's credentials only, no shared token."""
        return DoughnutAuth("doughnut", viewers=self.viewers)

    def shared(self, authorization: str | None) -> bool:
        """Whether the request reads with the service's shared token (today's behaviour)."""
        if self.mode == "shared":
            return True
        if self.mode == "doughnut" or self._expected is None:
            return False
        return carries((authorization or "").encode("utf-8", "surrogatepass"), self._expected)

    @cached_property
    def _expected(self) -> bytes | None:
        return digest_of(self.shared_token) if self.shared_token else None


def _bearer(authorization: str | None) -> str | None:
    """Doughnut's reading of the header: exactly ``Bearer `` then the token, untrimmed."""
    if authorization is None or not authorization.startswith("Bearer "):
        return None
    return authorization[len("Bearer "):]


def _query(request: HttpRequest) -> DoughnutQuery:
    """The parameters as the routes bind them (a repeated parameter: its last value)."""
    params, headers = request.query_params, request.headers
    return DoughnutQuery(params.get("tokenLimit"), params.get("seed"), params.get("viewer"),
                         headers.get("authorization"), headers.get("cookie"))


def install(app: FastAPI, reader: SnapshotReader, auth: DoughnutAuth,
            shared_read: Callable[[str, DoughnutQuery, str], Served],
            respond: Callable[..., Response],
            shared_cached: Callable[[str, DoughnutQuery], Served | None] = lambda *_: None,
            ) -> Callable[[HttpRequest, str], Served | None]:
    """Add the two routes; ``shared_read`` and ``respond`` are the app's own read and response.
    Returns the hot read of ``/graph`` (worker.http.hot): its answer when it is a fresh hit read
    by the snapshot's own viewer or another reader's remembered answer (``shared_cached`` for the
    shared token), else None."""

    def hot(request: HttpRequest, note_id: str) -> Served | None:
        q = _query(request)
        if auth.shared(q.authorization):
            return shared_cached(note_id, q)
        assert auth.viewers is not None
        read = DoughnutRead(note_id, q.token_limit, _bearer(q.authorization), "json", q.cookie)
        return cached_answer(reader, auth.viewers, read)

    def serve(request: HttpRequest, note_id: str, q: DoughnutQuery, fmt: str) -> Response:
        if auth.shared(q.authorization):
            return respond(request, shared_read(note_id, q, fmt))
        assert auth.viewers is not None
        read = DoughnutRead(note_id, q.token_limit, _bearer(q.authorization), fmt, q.cookie)
        try:
            served = answer(reader, auth.viewers, read)
        except Refusal as refusal:
            error = body_of(refusal, request.url.path, dt.datetime.now(dt.UTC))
            return Response(error.body, status_code=error.status, media_type=error.media_type)
        return respond(request, served)

    def graph(request: HttpRequest, note_id: str, q: Annotated[DoughnutQuery, Depends()]) -> Any:
        return serve(request, note_id, q, "json")

    def markdown(request: HttpRequest, note_id: str, q: Annotated[DoughnutQuery, Depends()]) -> Any:
        return serve(request, note_id, q, "markdown")

    app.get("/api/notes/{note_id}/graph", summary="Doughnut's own path: the context of a note",
            response_class=Response)(graph)
    app.get("/api/notes/{note_id}/ai-context-markdown", response_class=Response,
            summary="Doughnut's own path: the context as markdown, {\"markdown\": ...}")(markdown)
    return hot
