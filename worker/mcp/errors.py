"""What ``graphrag mcp``'s tools say when they cannot answer: what Doughnut's MCP server says.

Doughnut's MCP server (``mcp-server/`` at b2c0268c09) passes every backend error on as
``ERROR: <prefix>: <the error body as JSON>`` (``Focus context retrieval error`` today; the body gets
a ``status`` member when it has none). So for today's Doughnut a tool says, for the same case, what
Doughnut's own server would: the body Doughnut's backend answers on its path
(service.doughnut_errors: a note id or tokenLimit that is no whole number, a note with no row, a
note its owner's view may not read), after Doughnut's prefix. An error Doughnut has no answer for
(nothing can compute the context: 503) keeps this service's body, with its status. The 2025 era's
tools keep the HTTP reader's error body after that era's prefix.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import orjson

from graphrag import GraphRagError, InvalidParameter, NoteNotFound
from graphrag.core.errors import Forbidden
from service.doughnut_api import Refusal
from service.doughnut_errors import body_of
from worker.mcp.texts import TEXTS_2026, ToolTexts

__all__ = ["error_text"]

#: Doughnut's backend path each tool's answer stands for
PATHS = {"get_note_graph": "graph", "get_note_context_markdown": "ai-context-markdown"}


def _js(value: Any) -> str:
    """A number as JavaScript writes it into a URL (``String(n)``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def _refusal(err: GraphRagError, arguments: Mapping[str, Any]) -> Refusal | None:
    if isinstance(err, InvalidParameter) and err.parameter == "noteId":
        return Refusal("bad-note", _js(arguments.get("noteId")))
    if isinstance(err, InvalidParameter) and err.parameter == "tokenLimit":
        return Refusal("bad-limit", _js(arguments.get("tokenLimit")))
    if isinstance(err, NoteNotFound):
        return Refusal("no-note")
    if isinstance(err, Forbidden):
        return Refusal("forbidden")
    return None


def error_text(err: GraphRagError, texts: ToolTexts, tool: str,
               arguments: Mapping[str, Any] | None) -> str:
    """The text after ``ERROR: `` for ``err`` raised by ``tool`` called with ``arguments``."""
    arguments = arguments or {}
    refusal = _refusal(err, arguments) if texts is TEXTS_2026 else None
    if refusal is not None:
        path = f"/api/notes/{_js(arguments.get('noteId'))}/{PATHS.get(tool, 'graph')}"
        body = body_of(refusal, path, dt.datetime.now(dt.UTC)).body.decode()
    else:
        fields: dict[str, Any] = {"error": str(err)}
        if isinstance(err, InvalidParameter):
            fields["parameter"] = err.parameter
        if texts is TEXTS_2026:
            fields["status"] = 400 if isinstance(err, InvalidParameter) else 503
        body = orjson.dumps(fields).decode()
    return f"{texts.retrieval_error}: {body}"
