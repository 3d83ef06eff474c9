"""The MCP server: Doughnut's ``get_note_graph`` tool and ``get_note_context_markdown``, both answered
by the snapshot reader (cache, stale or live), over stdio or streamable HTTP.

Both tools take ``{"noteId": number, "tokenLimit": number}``. The input schema, ``get_note_graph``'s
description and the validation texts are Doughnut's own (its ``mcp-server/src/tools/get-note-graph.ts``):
they are what agents see. ``get_note_graph`` answers one text content holding exactly the bytes the HTTP
reader serves for the same note and tokenLimit (``GET /notes/{id}/graph``); ``get_note_context_markdown``
one text content holding the markdown ``GET /notes/{id}/context.md`` serves. A successful result
says where it came from in its ``_meta``: ``{"graphrag/source": "cache" | "stale" | "live",
"graphrag/ageSeconds": <int>}`` (the HTTP reader's ``X-Graphrag-Source`` and ``X-Graphrag-Age``); the
content stays Doughnut's, so an agent that ignores ``_meta`` sees what Doughnut's tool returns.

Errors never end the server: bad arguments and service errors are results with ``isError: true`` and
one text line. Validation comes first, in Doughnut's order and words: ``ERROR: noteId must be provided
as a number``, ``ERROR: tokenLimit must be provided as a number``, ``ERROR: tokenLimit must be a
positive number`` (0), ``ERROR: tokenLimit too low to fetch any note`` (5 or less). A service error
(unknown or deleted note, a parameter out of range, nothing can answer) reads ``ERROR: Graph retrieval
error: <the HTTP reader's JSON error body>``; anything unexpected is logged and reads ``ERROR: internal
error``. An unknown tool is a protocol error, as the MCP specification asks.

Transports: stdio (stdout carries only protocol messages; every log goes to stderr) and streamable HTTP
at ``/mcp`` (stateless, JSON responses) behind ``Authorization: Bearer <GRAPHRAG_READER_TOKEN>``,
compared in constant time: 401 on every path without it. The server is the SDK's low-level ``Server``,
so its tool list is written out exactly, not derived from Python signatures.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import hmac
import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Protocol

import anyio
import anyio.to_thread
import mcp_types as types
import orjson
import uvicorn
import uvicorn.config
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from starlette.types import ASGIApp, Receive, Scope, Send

from graphrag import GraphRagError, InvalidParameter, get_strategy
from graphrag.errors import ConfigurationError
from worker.compose import Wiring
from worker.refresh import BackgroundRefresher
from worker.settings import load_settings

__all__ = [
    "AGE_META", "SOURCE_META", "TEXTS_2025", "TEXTS_2026", "Answer", "BearerGate", "ContextSource",
    "GraphReader", "ReaderContext", "Rendered", "ToolTexts", "build_server", "http_app", "main",
    "texts_for",
]

log = logging.getLogger("graphrag.mcp")
SOURCE_META = "graphrag/source"
AGE_META = "graphrag/ageSeconds"
MCP_PATH = "/mcp"


# -- what the server reads through ---------------------------------------------------------------
class Answer(Protocol):
    """A body and where it came from (the reader's ``Served`` is one)."""

    @property
    def body(self) -> bytes: ...
    @property
    def source(self) -> str: ...
    @property
    def age_s(self) -> float: ...


class ContextSource(Protocol):
    """What the tools call. Raises NoteNotFound, InvalidParameter or another GraphRagError (e.g. the
    reader's Unavailable); may block (SQL, Redis), so the server calls it on a worker thread."""

    def graph(self, note_id: int, token_limit: int) -> Answer: ...
    def markdown(self, note_id: int, token_limit: int) -> Answer: ...


class GraphReader(Protocol):
    """The part of :class:`service.reader.SnapshotReader` :class:`ReaderContext` uses."""

    def get(self, note_id: int, *, token_limit: int | None = None, seed: int | None = None,
            strategy: str | None = None, fmt: str = "json") -> Any: ...


@dataclass(frozen=True, slots=True)
class Rendered:
    """A rendered body (UTF-8 markdown) with the source and age of the snapshot it came from."""

    body: bytes
    source: str
    age_s: float


class ReaderContext:
    """The ContextSource over the snapshot reader, for one strategy (``None``: the reader's default,
    the first kept for the database's layout). Both tools are the reader's answers: the JSON bytes
    the HTTP reader serves, and the markdown ``GET /notes/{id}/context.md`` serves (rendered from the
    snapshot, so a cache hit runs no SQL)."""

    def __init__(self, reader: GraphReader, strategy: str | None = None) -> None:
        self.reader, self.strategy = reader, strategy

    def graph(self, note_id: int, token_limit: int) -> Answer:
        served: Answer = self.reader.get(note_id, token_limit=token_limit, strategy=self.strategy)
        return served

    def markdown(self, note_id: int, token_limit: int) -> Answer:
        served = self.reader.get(note_id, token_limit=token_limit, strategy=self.strategy,
                                 fmt="markdown")
        return Rendered((served.text or "").encode("utf-8"), served.source, served.age_s)


# -- what agents see -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ToolTexts:
    """Doughnut's texts of one era: tool description, tokenLimit description, backend-error prefix."""

    graph_description: str
    token_limit_description: str
    retrieval_error: str
    markdown_description: str


NOTE_ID_DESCRIPTION = ("Numeric ID of the note to explore. Obtain this from 'find_most_relevant_note' "
                       "results or user-provided ID.")

MARKDOWN_DESCRIPTION = """\
Retrieves the same context as 'get_note_graph' as markdown to read rather than JSON to parse: the focus \
note (title, or subject, predicate and object for a link note; its contextual path, children, siblings, \
inbound references and details), then the related notes in ranking order, most relevant first, each \
with its relation to the focus note (e.g. "Younger sibling (YoungerSibling)") and its details. Details \
are in fenced blocks; titles are quoted like JSON strings.

Obtain the note ID and choose the token limit as for 'get_note_graph': the same notes are selected \
(the budget is counted on their JSON, so the markdown is somewhat longer)."""

MARKDOWN_DESCRIPTION_2026 = """\
Retrieves the same focus context as 'get_note_graph' as the markdown Doughnut gives its own AI \
assistant: a <focus_context> block with the focus note (title, notebook, folder path, its outgoing \
links, inbound references and a sample of folder peers, and its content), then the related notes \
(each with its depth and the retrieval path of wiki links that reached it) and their content in \
fenced blocks.

Obtain the note ID and choose the token limit as for 'get_note_graph': the same notes are selected."""


#: Doughnut's texts while its ``/graph`` answered the GraphRAGResult this service computes (the tool
#: as of commit 38a7de7fbe, the last before FocusContext replaced GraphRAG).
TEXTS_2025 = ToolTexts(
    graph_description='''Retrieves the note graph - a specific note along with its surrounding context and relationships.

What This Returns:
- Focus note: The requested note with full details
- Parent notes: Hierarchical path showing where this note sits in the knowledge structure
- Child notes: Direct sub-notes under this note
- Sibling notes: Other notes at the same level
- Related notes: Semantically connected notes from other parts of the knowledge base

Use Cases:
- Understanding note context and position in knowledge hierarchy
- Finding related information after a search
- Exploring knowledge connections and discovering new insights
- Building comprehensive understanding of a topic

You MUST obtain a valid note ID first using 'find_most_relevant_note' unless the user explicitly provides a numeric note ID.
You MUST provide a valid token limit to ensure the response fits within constraints alongside with the note ID. Your choice of the limit should consider the currently available context window. Example of a valid token limits:
1. If the note is short and the context window is large, you might set a higher token limit (e.g., 5000 tokens).
2. If the note is long or the context window is small, you might need to set a lower token limit (e.g., 500 tokens).

Navigation Pattern:
1. Use 'find_most_relevant_note' to find relevant notes
2. Extract note ID from search results
3. Use this tool to explore relationships and context
4. Follow related notes for deeper exploration''',  # noqa: E501
    token_limit_description=(
        "A valid token limit to ensure the response fits within constraints alongside with the note ID. "
        "Your choice of the limit should consider the currently available context window."
    ),
    retrieval_error="Graph retrieval error",
    markdown_description=MARKDOWN_DESCRIPTION,
)

#: Doughnut's texts at commit b2c0268c09, describing its FocusContext JSON (the wiki model).
TEXTS_2026 = ToolTexts(
    graph_description='''Retrieves structured **focus context** for one note: the focus note plus related notes discovered through wiki links, inbound references, and sampled folder peers.

What this returns (JSON):
- **focusNote** — The requested note (depth 0) with title, notebook, folder path, truncated **content** when needed, and lightweight lists: **outgoingLinks** and **inboundReferences** (wiki-style link strings), plus **sampleSiblings** (a small capped sample of peers in the same folder or notebook root).
- **relatedNotes** — Notes reached within the post-focus share of the combined token budget and max traversal depth. Each entry includes **depth**, **retrievalPath** (how the note was reached from the focus), and truncated **content** when needed.

Use cases:
- Inspect how a note connects to the rest of the notebook before answering questions about it.
- After search, pull bounded context around a candidate note without loading the whole notebook.

You MUST obtain a valid note ID first using 'find_most_relevant_note' unless the user explicitly provides a numeric note ID.
You MUST provide a valid token limit (combined budget for focus plus related note bodies). Example choices:
1. Short focus note and a large context window → higher limit (e.g., 5000).
2. Long focus note or a small context window → lower limit (e.g., 500); a large focus body consumes budget before related notes are included.

Navigation pattern:
1. Use 'find_most_relevant_note' to find relevant notes
2. Extract note ID from search results
3. Use this tool to load focus context around that note
4. Follow **outgoingLinks** / **relatedNotes** titles for deeper exploration if needed''',  # noqa: E501
    token_limit_description=(
        "Approximate token budget for the focus note body plus all related note bodies combined. "
        "Pick a value that fits your remaining context window."
    ),
    retrieval_error="Focus context retrieval error",
    markdown_description=MARKDOWN_DESCRIPTION_2026,
)




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


def _service_error(err: GraphRagError, texts: ToolTexts) -> types.CallToolResult:
    """The HTTP reader's error body after Doughnut's prefix; JSON keeps it on one line."""
    body: dict[str, str] = {"error": str(err)}
    if isinstance(err, InvalidParameter):
        body["parameter"] = err.parameter
    return _error_result(f"{texts.retrieval_error}: {orjson.dumps(body).decode()}")


def _answer_result(answer: Answer) -> types.CallToolResult:
    meta = {SOURCE_META: answer.source, AGE_META: int(answer.age_s)}
    return types.CallToolResult(content=[types.TextContent(text=answer.body.decode("utf-8"))],
                                _meta=meta)


def build_server(source: ContextSource,
                 texts: ToolTexts | Callable[[], ToolTexts] = TEXTS_2025) -> Server[Any]:
    """The MCP server over ``source``; ``texts`` are Doughnut's texts for the database's profile,
    or how to find them (asked at the first listing, so a server may start while the database is
    down; until it answers, today's texts are listed)."""
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
        return await _call(fetch, params.arguments, await anyio.to_thread.run_sync(current))

    return Server("doughnut-graphrag", version=_version(), on_list_tools=list_tools,
                  on_call_tool=call_tool)


def _version() -> str:
    with contextlib.suppress(PackageNotFoundError):
        return version("doughnut-graphrag")
    return "0"


async def _call(fetch: Callable[[int, int], Answer], arguments: Mapping[str, Any] | None,
                texts: ToolTexts) -> types.CallToolResult:
    try:
        note_id, token_limit = parse_arguments(arguments)
        answer = await anyio.to_thread.run_sync(fetch, note_id, token_limit)
    except _Refused as refused:
        return _error_result(str(refused))
    except GraphRagError as err:
        return _service_error(err, texts)
    except Exception:
        log.exception("tool call failed")
        return _error_result("internal error")
    return _answer_result(answer)


# -- transports ----------------------------------------------------------------------------------
class BearerGate:
    """Pure ASGI: every HTTP request needs ``Authorization: Bearer <token>``, compared in constant time
    (as digests, so not even the length leaks); otherwise 401 with ``WWW-Authenticate: Bearer``."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        if not token:
            raise ValueError("the bearer token must not be empty")
        self.app, self.expected = app, hashlib.sha256(f"Bearer {token}".encode()).digest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        if scope["type"] == "lifespan" or hmac.compare_digest(hashlib.sha256(given).digest(),
                                                             self.expected):
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            return  # a websocket: close without accepting
        body = b'{"error":"missing or wrong bearer token"}'
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})


def http_app(server: Server[Any], *, token: str, host: str = "127.0.0.1") -> ASGIApp:
    """Streamable HTTP at ``/mcp`` behind the bearer token. Stateless with JSON responses: every
    request stands alone, so several replicas can share one address."""
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host, stateless_http=True,
                                     json_response=True)
    return BearerGate(app, token=token)


async def _serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# -- the process ---------------------------------------------------------------------------------
def texts_for(strategy: str) -> ToolTexts:
    """Doughnut's texts of the era whose JSON ``strategy`` computes."""
    return TEXTS_2026 if get_strategy(strategy).model == "wiki" else TEXTS_2025


def _wire(transport: str) -> tuple[ContextSource, Callable[[], ToolTexts], str, Callable[[], None]]:
    """The reader as ``graphrag serve`` wires it (stale snapshots refreshed in the background)."""
    settings = load_settings()
    token = settings.reader_token.get_secret_value() if settings.reader_token else ""
    if transport == "http" and not token:
        raise ConfigurationError("GRAPHRAG_READER_TOKEN must be set to serve MCP over HTTP")
    wiring = Wiring(settings)
    refresher = BackgroundRefresher(lambda note_id: wiring.rebuild([note_id]), wiring.coordination,
                                    wiring.dirty)
    reader = wiring.reader(on_stale=refresher)
    return (ReaderContext(reader), lambda: texts_for(wiring.strategies()[0]), token,
            refresher.shutdown)


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
        source, texts, token, stop = _wire(args.transport)
    except GraphRagError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    server = build_server(source, texts)
    try:
        if args.transport == "stdio":
            anyio.run(_serve_stdio, server)
        else:
            uvicorn.run(http_app(server, token=token, host=args.host), host=args.host, port=args.port,
                        log_config=_stderr_logging())
    finally:
        stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
