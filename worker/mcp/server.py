"""The MCP server: Doughnut's ``get_note_graph`` tool and ``get_note_context_markdown``, both answered
by the snapshot reader (cache, stale or live), over stdio or streamable HTTP.

Both tools take ``{"noteId": number, "tokenLimit": number}``. The input schema, ``get_note_graph``'s
description and the validation texts are Doughnut's own (its ``mcp-server/src/tools/get-note-graph.ts``):
they are what agents see. ``get_note_graph`` answers one text content holding exactly the bytes the HTTP
reader serves for the same note and tokenLimit (``GET /notes/{id}/graph``); ``get_note_context_markdown``
one text content holding the markdown ``GET /notes/{id}/context.md`` serves. A successful result
says where it came from in its ``_meta``: ``{"graphrag/source": "cache" | "stale" | "live",
"graphrag/ageSeconds": <int>}`` (the HTTP reader's ``X-Graphrag-Source`` and ``X-Graphrag-Age``; and
``"graphrag/reason"``, its ``X-Graphrag-Reason``, while the change feed is behind); the
content stays Doughnut's, so an agent that ignores ``_meta`` sees what Doughnut's tool returns.

Errors never end the server: bad arguments and service errors are results with ``isError: true`` and
one text line. Validation comes first, in Doughnut's order and words: ``ERROR: noteId must be provided
as a number``, ``ERROR: tokenLimit must be provided as a number``, ``ERROR: tokenLimit must be a
positive number`` (0), ``ERROR: tokenLimit too low to fetch any note`` (5 or less). A service error
(unknown or deleted note, a parameter out of range, nothing can answer) reads ``ERROR: Graph retrieval
error: <the HTTP reader's JSON error body>``; anything unexpected is logged and reads ``ERROR: internal
error``. An unknown tool is a protocol error, as the MCP specification asks.

Transports: stdio (stdout carries only protocol messages; every log goes to stderr) and streamable HTTP
at ``/mcp`` (JSON responses; sessions for handshake-era clients only) behind
``Authorization: Bearer <GRAPHRAG_READER_TOKEN>``, compared in constant time: 401 on every path
without it. The server is the SDK's low-level ``Server``, so its tool list is written out exactly,
not derived from Python signatures.

With a change listener, each note's context is also a resource agents read and subscribe to
(:mod:`worker.mcp.subscriptions`). This module holds the server itself (arguments, tool list,
results, calls) and the ``graphrag mcp`` process; what the tools read through is
:mod:`worker.mcp.source`, the texts agents see :mod:`worker.mcp.texts`, and the HTTP transport's
gate :mod:`worker.mcp.http`.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NamedTuple

import anyio
import anyio.to_thread
import mcp_types as types
import uvicorn
import uvicorn.config
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from graphrag import GraphRagError, InvalidParameter
from graphrag.core.errors import ConfigurationError
from service.ports import SnapshotChanges
from worker.compose import Wiring
from worker.deadline import with_head_deadline
from worker.mcp.errors import error_text
from worker.mcp.http import SessionLimits, http_app
from worker.mcp.source import Answer, ContextSource, ReaderContext
from worker.mcp.subscriptions import DEFAULT_LIMITS, Limits, Resources
from worker.mcp.texts import NOTE_ID_DESCRIPTION, TEXTS_2025, TEXTS_2026, ToolTexts, texts_for
from worker.refresh import BackgroundRefresher
from worker.settings import Settings, load_settings

__all__ = ["AGE_META", "REASON_META", "SOURCE_META", "build_server", "main"]

log = logging.getLogger("graphrag.mcp")
SOURCE_META = "graphrag/source"
AGE_META = "graphrag/ageSeconds"
#: why no snapshot was trusted for the answer (the change feed is behind: service.feed)
REASON_META = "graphrag/reason"
#: How long a stopping HTTP server waits for open streams (subscriptions never end on their own);
#: then it cuts them, and their clients listen again elsewhere, as the protocol has them do.
GRACE_S = 3


class _Refused(Exception):
    """Arguments Doughnut's tool would refuse; the message is its text."""


def _number(args: Mapping[str, Any], name: str) -> float | int | None:
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return value


def _whole(name: str, value: float | int) -> int:
    if isinstance(value, float):
        if not value.is_integer():
            raise InvalidParameter(name, f"{value!r} is not a whole number")
        return int(value)
    return value


def parse_arguments(args: Mapping[str, Any] | None) -> tuple[int, int]:
    """(noteId, tokenLimit) validated in Doughnut's order with its texts; raises _Refused, or
    InvalidParameter for a number that is not whole (Doughnut's backend refuses those too)."""
    args = args or {}
    note_id = _number(args, "noteId")
    if note_id is None:
        raise _Refused("noteId must be provided as a number")
    limit = _number(args, "tokenLimit")
    if limit is None:
        raise _Refused("tokenLimit must be provided as a number")
    if limit == 0:
        raise _Refused("tokenLimit must be a positive number")
    if limit <= 5:
        raise _Refused("tokenLimit too low to fetch any note")
    return _whole("noteId", note_id), _whole("tokenLimit", limit)


def _input_schema(texts: ToolTexts) -> dict[str, Any]:
    """Doughnut's schema as zod's ``toJSONSchema(..., {target: 'draft-7'})`` writes it."""
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "noteId": {"type": "number", "description": NOTE_ID_DESCRIPTION},
            "tokenLimit": {"type": "number", "description": texts.token_limit_description},
        },
        "required": ["noteId", "tokenLimit"],
        "additionalProperties": False,
    }


def _tools(texts: ToolTexts) -> list[types.Tool]:
    hints = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return [
        types.Tool(name="get_note_graph", description=texts.graph_description,
                   input_schema=_input_schema(texts), annotations=hints),
        types.Tool(name="get_note_context_markdown", description=texts.markdown_description,
                   input_schema=_input_schema(texts), annotations=hints),
    ]


# -- results -------------------------------------------------------------------------------------
def _error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=f"ERROR: {message}")], is_error=True)


def _answer_result(answer: Answer) -> types.CallToolResult:
    meta: dict[str, str | int] = {SOURCE_META: answer.source, AGE_META: int(answer.age_s)}
    if answer.reason is not None:
        meta[REASON_META] = answer.reason
    return types.CallToolResult(content=[types.TextContent(text=answer.body.decode("utf-8"))],
                                _meta=meta)


def build_server(source: ContextSource,
                 texts: ToolTexts | Callable[[], ToolTexts] = TEXTS_2025,
                 changes: SnapshotChanges | None = None, limits: Limits = DEFAULT_LIMITS) -> Server[Any]:
    """The MCP server over ``source``; ``texts`` are Doughnut's texts for the database's profile,
    or how to find them (asked at the first listing, so a server may start while the database is
    down; until it answers, today's texts are listed). With ``changes``, each note's context is
    also a resource agents can read and subscribe to (:mod:`worker.mcp.subscriptions`)."""
    known: list[ToolTexts] = [texts] if isinstance(texts, ToolTexts) else []

    def current() -> ToolTexts:
        if not known and callable(texts):
            try:
                known.append(texts())
            except GraphRagError as err:
                log.warning("cannot tell the database's layout yet (%s); listing today's tools", err)
                return TEXTS_2026
        return known[0]

    fetchers: dict[str, Callable[[int, int], Answer]] = {
        "get_note_graph": source.graph, "get_note_context_markdown": source.markdown}

    async def list_tools(_: ServerRequestContext[Any],
                         __: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        resolved = await anyio.to_thread.run_sync(current)
        return types.ListToolsResult(tools=_tools(resolved))

    async def call_tool(_: ServerRequestContext[Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        fetch = fetchers.get(params.name)
        if fetch is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return await _call(fetch, params.name, params.arguments,
                           await anyio.to_thread.run_sync(current))

    if changes is None:
        return Server("doughnut-graphrag", version=_version(), on_list_tools=list_tools,
                      on_call_tool=call_tool)
    resources = Resources(source, changes, limits)
    return Server("doughnut-graphrag", version=_version(), on_list_tools=list_tools,
                  on_call_tool=call_tool, lifespan=resources.running,
                  on_list_resources=resources.list_resources,
                  on_list_resource_templates=resources.list_templates,
                  on_read_resource=resources.read_resource, on_subscribe_resource=resources.subscribe,
                  on_unsubscribe_resource=resources.unsubscribe,
                  on_subscriptions_listen=resources.listen)


def _version() -> str:
    with contextlib.suppress(PackageNotFoundError):
        return version("doughnut-graphrag")
    return "0"


async def _call(fetch: Callable[[int, int], Answer], tool: str,
                arguments: Mapping[str, Any] | None, texts: ToolTexts) -> types.CallToolResult:
    try:
        note_id, token_limit = parse_arguments(arguments)
        answer = await anyio.to_thread.run_sync(fetch, note_id, token_limit)
    except _Refused as refused:
        return _error_result(str(refused))
    except GraphRagError as err:  # one line, as Doughnut's MCP server says it (worker.mcp.errors)
        return _error_result(error_text(err, texts, tool, arguments))
    except Exception:
        log.exception("tool call failed")
        return _error_result("internal error")
    return _answer_result(answer)


# -- transports (streamable HTTP: worker.mcp.http) -----------------------------------------------
async def _serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# -- the process ---------------------------------------------------------------------------------


class _Wired(NamedTuple):
    source: ContextSource
    texts: Callable[[], ToolTexts]
    token: str
    stop: Callable[[], None]
    changes: SnapshotChanges
    settings: Settings


def _wire(transport: str) -> _Wired:
    """The reader as ``graphrag serve`` wires it (stale snapshots refreshed in the background)."""
    settings = load_settings()
    token = settings.reader_token.get_secret_value() if settings.reader_token else ""
    if transport == "http" and not token:
        raise ConfigurationError("GRAPHRAG_READER_TOKEN must be set to serve MCP over HTTP")
    wiring = Wiring(settings)
    wiring.check_binding()
    refresher = BackgroundRefresher(lambda note_id: wiring.rebuild([note_id]), wiring.coordination,
                                    wiring.dirty)
    reader = wiring.reader(on_stale=refresher)
    return _Wired(ReaderContext(reader), lambda: texts_for(wiring.strategies()[0]), token,
                  refresher.shutdown, wiring.changes, settings)


def _stderr_logging() -> dict[str, Any]:
    """uvicorn's logging with its access log moved from stdout to stderr, like every other log."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    return config


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="graphrag mcp", description="Graph RAG tools over MCP.")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="with --transport http [127.0.0.1]")
    parser.add_argument("--port", type=int, default=8001, help="with --transport http [8001]")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until stdin closes (stdio) or the process is stopped (http); errors: one line, exit 1."""
    args = _parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        wired = _wire(args.transport)
    except GraphRagError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    s = wired.settings
    server = build_server(wired.source, wired.texts, wired.changes,
                          Limits(s.mcp_max_subscriptions, s.mcp_max_listen_uris, s.mcp_max_listens))
    try:
        if args.transport == "stdio":
            anyio.run(_serve_stdio, server)
        else:
            app = http_app(server, token=wired.token, host=args.host, sessions=SessionLimits(
                s.mcp_max_sessions, s.mcp_session_idle_s))
            uvicorn.run(app, host=args.host, port=args.port, log_config=_stderr_logging(),
                        timeout_graceful_shutdown=GRACE_S, timeout_keep_alive=5,
                        http=with_head_deadline(s.header_timeout_s))
    finally:
        wired.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
