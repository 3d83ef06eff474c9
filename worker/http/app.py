"""The HTTP surface: Doughnut's GraphRAGResult from snapshots, health and metrics.

``POST /webhooks/note-events`` takes Doughnut's signed note-edit events (:mod:`worker.http.webhook`).
``GET /notes/{id}/graph?tokenLimit=&seed=&strategy=`` and Doughnut's own path
``GET /api/notes/{id}/graph?tokenLimit=N`` answer the result JSON exactly, with
``X-Graphrag-Source: cache|stale|live`` and ``X-Graphrag-Age: <seconds>`` (and, while the change
feed is behind and snapshots are not trusted, ``X-Graphrag-Reason: <why>``; service.feed), and the
validators of a conditional read (a strong ``ETag``, ``Last-Modified``; ``If-None-Match`` naming
the answer gives ``304`` with no body: worker.http.conditional). Both need
``Authorization: Bearer <GRAPHRAG_READER_TOKEN>`` (compared in constant time). Bad parameters give
400 with a JSON body naming the parameter, an unknown or deleted note 404, no snapshot and no
database 503; no response ever carries a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from fastapi import Depends, FastAPI, Header, Query
from fastapi import Request as HttpRequest
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from graphrag import DatabaseUnavailable, GraphRagError, InvalidParameter, NoteNotFound
from graphrag.core.errors import CacheUnavailable, Forbidden, Unavailable
from graphrag.wiki.model import Viewer
from service.reader import Served, SnapshotReader
from worker.gate import BearerGate
from worker.http.conditional import url_path, validators
from worker.http.doughnut_paths import GRAPH as DOUGHNUT_GRAPH
from worker.http.doughnut_paths import PATHS as DOUGHNUT_PATHS
from worker.http.doughnut_paths import DoughnutAuth, DoughnutQuery, install
from worker.http.front import Fronted
from worker.http.hot import HotReads
from worker.http.webhook import MAX_BODY_BYTES, WebhookReceiver

__all__ = ["create_app", "install_error_handlers", "respond"]

log = logging.getLogger("graphrag.http")
_MAX_INT_DIGITS = 12  # larger numbers are rejected before int() so hostile input stays cheap


def _int(name: str, value: str | None, *, minimum: int = 0) -> int | None:
    if value is None:
        return None
    text = value.strip()
    digits = text.removeprefix("-")
    # ASCII only: str.isdigit() also admits "²", "③" or Arabic-Indic digits, which are no ids.
    if not (digits.isascii() and digits.isdigit()) or len(text) > _MAX_INT_DIGITS:
        raise InvalidParameter(name, f"{value[:32]!r} is not an integer")
    number = int(text)
    if number < minimum:
        raise InvalidParameter(name, f"must be at least {minimum}")
    return number


class _Args(TypedDict):
    """What a read asks :meth:`SnapshotReader.get` (and ``cached``) for."""

    note_id: int
    token_limit: int | None
    seed: int | None
    strategy: str | None
    viewer: Viewer | None


@dataclass
class _Query:
    """The parameters of a read (``authorization`` is declared for OpenAPI; BearerGate checks it)."""

    token_limit: Annotated[str | None, Query(alias="tokenLimit")] = None
    seed: Annotated[str | None, Query()] = None
    strategy: Annotated[str | None, Query()] = None
    viewer: Annotated[str | None, Query(description="user id whose view (today's Doughnut)")] = None
    authorization: Annotated[str | None, Header()] = None


def _args(note_id: str, q: _Query) -> _Args:
    """A read's arguments from the path and the query (InvalidParameter names a bad one)."""
    viewer = _int("viewer", q.viewer)
    return _Args(note_id=_int("noteId", note_id) or 0,
                 token_limit=_int("tokenLimit", q.token_limit, minimum=1),
                 seed=_int("seed", q.seed, minimum=-(2**63)), strategy=q.strategy,
                 viewer=None if viewer is None else Viewer(user_id=viewer))


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def respond(request: HttpRequest, served: Served, media_type: str = "application/json",
            content: bytes | None = None) -> Response:
    """A read's answer: its body, where it came from and how old, and its validators (a
    conditional read that names it gets 304). Every read answers through here, the hot ones too,
    so its headers are put as ASGI sends them, without the framework's parsing and encoding."""
    body = served.body if content is None else content
    scope = request.scope
    query = request.query_params if scope.get("query_string") else _NO_QUERY
    tags = validators(body, url_path(scope), query, computed_s=served.computed_at_ms / 1000)
    if tags.not_modified(_header(scope, b"if-none-match")):
        response = Response(status_code=304)
    else:
        response = Response(body, media_type=media_type)
    response.raw_headers.extend(_whence(served))
    response.raw_headers.extend(tags.headers)
    return response


_NO_QUERY: dict[str, str] = {}


def _header(scope: Scope, name: bytes) -> str | None:
    """The request's first ``name`` header (lower-case, as ASGI gives them), or None."""
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def _whence(served: Served) -> list[tuple[bytes, bytes]]:
    """Where an answer came from, how old it is and (the change feed behind) why."""
    headers = [(b"x-graphrag-source", served.source.encode()),
               (b"x-graphrag-age", str(int(served.age_s)).encode())]
    if served.reason is not None:
        headers.append((b"x-graphrag-reason", served.reason.encode("latin-1")))
    return headers


def create_app(
    reader: SnapshotReader, *, reader_token: str | None, registry: CollectorRegistry,
    health: Callable[[], dict[str, str]], webhook: WebhookReceiver | None = None,
    doughnut: DoughnutAuth | None = None,
) -> Fronted:
    """The ASGI app. ``health`` reports each dependency as ``"ok"`` or a reason; without a
    ``webhook`` receiver (no secret configured) the webhook route answers 503. ``doughnut``: how
    Doughnut's own paths authenticate (worker.http.doughnut_paths; default: the shared token). Without
    a ``reader_token`` (``GRAPHRAG_READER_AUTH=doughnut`` only) the service's own paths refuse
    every request."""
    auth = doughnut or DoughnutAuth("shared")
    if auth.mode != "doughnut" and not reader_token:
        raise ValueError("reader_token must not be empty")
    app = Fronted(title="Graph RAG snapshots for Doughnut", version="1")

    def read(note_id: str, q: _Query, fmt: str = "json") -> Served:
        return reader.get(**_args(note_id, q), fmt=fmt)

    def cached(note_id: str, q: _Query) -> Served | None:
        return reader.cached(**_args(note_id, q))

    @app.get("/notes/{note_id}/graph", summary="The context of a note (JSON)")
    def graph(request: HttpRequest, note_id: str, q: Annotated[_Query, Depends()]) -> Response:
        return respond(request, read(note_id, q))

    @app.get("/notes/{note_id}/context.md", summary="The context of a note as LLM-ready markdown")
    def context_markdown(request: HttpRequest, note_id: str,
                         q: Annotated[_Query, Depends()]) -> Response:
        served = read(note_id, q, "markdown")
        text = (served.text or "").encode("utf-8", "replace")
        return respond(request, served, "text/markdown; charset=utf-8", text)

    def shared_read(note_id: str, q: DoughnutQuery, fmt: str) -> Served:
        return read(note_id, _Query(q.token_limit, q.seed, None, q.viewer, q.authorization), fmt)

    def shared_cached(note_id: str, q: DoughnutQuery) -> Served | None:
        return cached(note_id, _Query(q.token_limit, q.seed, None, q.viewer, q.authorization))

    def own_hot(request: HttpRequest, note_id: str) -> Served | None:
        params = request.query_params
        return cached(note_id, _Query(params.get("tokenLimit"), params.get("seed"),
                                      params.get("strategy"), params.get("viewer")))

    doughnut_hot = install(app, reader, auth, shared_read, respond, shared_cached)

    @app.post("/webhooks/note-events", status_code=202, summary="Doughnut note-edit events")
    async def note_events(request: HttpRequest) -> JSONResponse:
        if webhook is None:
            return _error(503, "GRAPHRAG_WEBHOOK_SECRET is not configured")
        body = await _bounded_body(request, MAX_BODY_BYTES)
        if body is None:
            return _error(413, f"body larger than {MAX_BODY_BYTES} bytes")
        reply = await run_in_threadpool(webhook.receive, body, dict(request.headers))
        return JSONResponse(reply.body, status_code=reply.status)

    @app.get("/healthz", summary="Dependencies' health")
    def healthz() -> JSONResponse:
        report = health()
        ok = any(report.get(name) == "ok" for name in ("redis", "database"))
        status = "ok" if report.get("feed", "ok") == "ok" else "degraded"
        return JSONResponse({"status": status if ok else "unavailable", **report},
                            status_code=200 if ok else 503)

    @app.get("/metrics", summary="Prometheus metrics")
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    install_error_handlers(app)
    app.add_front(HotReads, reads=[(OWN_GRAPH, own_hot), (DOUGHNUT_GRAPH, doughnut_hot)],
                       respond=respond)
    app.add_front(BearerGate, token=reader_token or None, public=_PUBLIC_PATHS,
                       open_paths=None if auth.mode == "shared" else DOUGHNUT_PATHS)
    return app


#: the service's own JSON path, the note's id captured (worker.http.hot)
OWN_GRAPH = r"/notes/([^/]+)/graph"
_PUBLIC_PATHS = frozenset({"/healthz", "/metrics", "/webhooks/note-events", "/openapi.json",
                           "/docs", "/docs/oauth2-redirect", "/redoc"})


async def _bounded_body(request: HttpRequest, limit: int) -> bytes | None:
    """The body, or None as soon as it (declared or streamed) exceeds ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: HttpRequest, err: Exception) -> JSONResponse:
        assert isinstance(err, StarletteHTTPException)
        return _error(err.status_code, str(err.detail))

    @app.exception_handler(InvalidParameter)
    async def invalid(_: HttpRequest, err: Exception) -> JSONResponse:
        assert isinstance(err, InvalidParameter)
        return _error(400, str(err), parameter=err.parameter)

    @app.exception_handler(NoteNotFound)
    async def not_found(_: HttpRequest, err: Exception) -> JSONResponse:
        return _error(404, str(err))

    @app.exception_handler(Forbidden)
    async def forbidden(_: HttpRequest, err: Exception) -> JSONResponse:
        return _error(403, str(err))

    @app.exception_handler(GraphRagError)
    async def unavailable(_: HttpRequest, err: Exception) -> JSONResponse:
        if isinstance(err, Unavailable | DatabaseUnavailable | CacheUnavailable):
            return _error(503, str(err))
        log.error("unexpected service error: %s", err)
        return _error(500, "internal error")

    @app.exception_handler(Exception)
    async def crashed(_: HttpRequest, err: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return _error(500, "internal error")
