"""Doughnut's bodies for the refusals on its two context paths (service.doughnut_api.Refusal).

What Doughnut (commit b2c0268c09: Spring Boot 4, Spring 7, Jackson 3) answers instead of a context
(docs/doughnut.md, "Users, read rules and errors"):

* a path value or ``tokenLimit`` that is absent or does not convert, or a note id with no row: 400,
  Spring's ``ProblemDetail`` (``application/problem+json``; members sorted: ``detail``, ``instance``
  = the request path without the query, ``status``, ``title``), e.g. ``{"detail":"Required
  parameter 'tokenLimit' is not present.","instance":"/api/notes/7/graph","status":400,
  "title":"Bad Request"}``;
* nobody logged in and a notebook outside the bazaar: 401 with Doughnut's ``ApiError``
  ``{"message":"User Not Found","errorType":"BINDING_ERROR","errors":{}}``;
* a user who may not read the note: Doughnut throws an exception nothing handles and Spring Boot
  answers 500 with its timestamped error body. Its clients treat that like any other failure (the
  web app ignores every error of these calls but 401; Doughnut's MCP server wraps any error body
  alike), so this service answers 403 with the same shape of body instead
  (``{"timestamp":…,"status":403,"error":"Forbidden","path":…}``): a refusal says refusal, and
  nothing about the note leaks either way.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import orjson

from service.doughnut_api import Refusal

__all__ = ["DoughnutError", "body_of"]


@dataclass(frozen=True, slots=True)
class DoughnutError:
    """An answer Doughnut gives instead of a context: status, media type and the body's bytes."""

    status: int
    media_type: str
    body: bytes


def _problem(detail: str, path: str) -> DoughnutError:
    body = {"detail": detail, "instance": path, "status": 400, "title": "Bad Request"}
    return DoughnutError(400, "application/problem+json", orjson.dumps(body))


def body_of(refusal: Refusal, path: str, now: dt.datetime) -> DoughnutError:
    """Doughnut's answer to ``refusal`` on the request path ``path`` (``now``: the timestamp)."""
    if refusal.kind == "bad-note":
        return _problem(f"Failed to convert 'note' with value: '{refusal.raw}'", path)
    if refusal.kind == "no-note":
        return _problem("Required path variable 'note' is not present.", path)
    if refusal.kind == "no-limit":
        return _problem("Required parameter 'tokenLimit' is not present.", path)
    if refusal.kind == "bad-limit":
        return _problem(f"Failed to convert 'tokenLimit' with value: '{refusal.raw}'", path)
    if refusal.kind == "not-logged-in":
        return DoughnutError(401, "application/json",
                             b'{"message":"User Not Found","errorType":"BINDING_ERROR","errors":{}}')
    stamp = now.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    body = {"timestamp": stamp, "status": 403, "error": "Forbidden", "path": path}
    return DoughnutError(403, "application/json", orjson.dumps(body))
