"""The hot read without the framework's routing: a fresh hit of ``/graph`` answered in the loop.

A hit costs the reader a few hundred microseconds; through the framework's routing, dependency
injection and a worker thread it cost several times that. :class:`HotReads` is a pure ASGI layer in
front of the app's routes (inside the bearer gate and the response counter, so authentication and
counting are unchanged) that answers ``GET /notes/{id}/graph`` and Doughnut's
``GET /api/notes/{id}/graph`` itself when, and only when, the answer is a fresh hit:

* **Only what the route would send.** Its read is the route's own (the same parameters bound the
  same way, :meth:`service.reader.SnapshotReader.cached`: the answer ``get`` gives on its fresh-hit
  path), and its response is the route's own ``respond`` (the same headers, validators and ``304``).
* **Anything else goes to the route, untouched**: a miss, an outdated or stale snapshot, another
  viewer's read, a token whose user is not remembered, the change feed behind, a parameter that does
  not parse, any error. The route then answers it as before, at the cost of one more cache read.
* **Nothing blocking but the hit.** What runs in the event loop is one cache read, a decompression
  and (another tokenLimit) a replay: no SQL, no computation, no lock; everything that may wait
  longer runs in the route's worker thread as before.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

from fastapi import Request as HttpRequest
from fastapi.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from service.reader import Served

__all__ = ["HotRead", "HotReads"]

log = logging.getLogger("graphrag.http")

#: a route's hot read: the request and the note's path value -> a fresh hit's answer, or None
HotRead = Callable[[HttpRequest, str], Served | None]


class HotReads:
    """Answers the fresh hits of ``reads`` (a path pattern capturing the note, its hot read) with
    ``respond``; passes every other request to ``app``."""

    def __init__(self, app: ASGIApp, *, reads: Sequence[tuple[str, HotRead]],
                 respond: Callable[[HttpRequest, Served], Response]) -> None:
        self.app, self.respond = app, respond
        self.reads = [(re.compile(pattern), read) for pattern, read in reads]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            for pattern, read in self.reads:
                found = pattern.fullmatch(scope["path"])
                if found is not None:
                    request = HttpRequest(scope, receive)
                    served = _tried(read, request, found.group(1))
                    if served is not None:
                        await self.respond(request, served)(scope, receive, send)
                        return
                    break
        await self.app(scope, receive, send)


def _tried(read: HotRead, request: HttpRequest, note: str) -> Served | None:
    """The hot read's answer; None when it raised, so that the route answers (and reports) it."""
    try:
        return read(request, note)
    except Exception:
        log.debug("the hot read of %s passed to the route", request.url.path, exc_info=True)
        return None
