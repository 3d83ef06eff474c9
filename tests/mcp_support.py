"""What the ``graphrag mcp`` tests share: the service they run against and the checks they make.

The service is the bundled sample notebook in SQLite and the real Redis under a private key prefix
(removed afterwards), with the HTTP reader (``worker.http.server.build_http_app``) built in-process on
both; the subprocess is given the same settings. The checks compare every answer of the tools with
that reader's, over whichever transport the client speaks. ``tests/conftest.py`` holds the fixtures
built from it (``sample_url``, ``svc``, ``no_inherited_settings``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import orjson
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from graphrag.tree.markdown import graph_markdown
from service.context import ContextService
from service.rebuild import rebuild
from storage.redis.cache import RedisCache as SnapshotStore
from storage.sample import SAMPLE_FOCUS_IDS
from tests.redis.readers import real_redis, redis_url, unique_prefix
from tests.wiring import build_service, build_snapshot_store
from worker.compose import wall_ms
from worker.http.server import build_http_app
from worker.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[1]
#: The installed console script, started as an agent's configuration would start it.
GRAPHRAG = str(Path(sys.executable).with_name("graphrag"))
TOKEN = "mcp-test-reader-token"
NOTES = sorted(v for k, v in SAMPLE_FOCUS_IDS.items() if k != "deleted")
TOOLS = ["get_note_graph", "get_note_context_markdown"]
# Doughnut's texts, from its mcp-server/src/tools/get-note-graph.ts (the GraphRAG era, commit 38a7de7fbe)
NOTE_ID_TEXT = ("Numeric ID of the note to explore. Obtain this from 'find_most_relevant_note' results "
                "or user-provided ID.")
TOKEN_LIMIT_TEXT = ("A valid token limit to ensure the response fits within constraints alongside with "
                    "the note ID. Your choice of the limit should consider the currently available "
                    "context window.")
EXPECTED_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"noteId": {"type": "number", "description": NOTE_ID_TEXT},
                   "tokenLimit": {"type": "number", "description": TOKEN_LIMIT_TEXT}},
    "required": ["noteId", "tokenLimit"],
    "additionalProperties": False,
}
NO_NOTE_ID = "ERROR: noteId must be provided as a number"
NO_LIMIT = "ERROR: tokenLimit must be provided as a number"
BAD_ARGUMENTS: list[tuple[dict[str, Any] | None, str]] = [
    ({"noteId": 224, "tokenLimit": 5}, "ERROR: tokenLimit too low to fetch any note"),
    ({"noteId": 224, "tokenLimit": -40}, "ERROR: tokenLimit too low to fetch any note"),
    ({"noteId": 224, "tokenLimit": 0}, "ERROR: tokenLimit must be a positive number"),
    ({"noteId": 224}, NO_LIMIT),
    ({"noteId": 224, "tokenLimit": "500"}, NO_LIMIT),
    ({"noteId": 224, "tokenLimit": None}, NO_LIMIT),
    ({"tokenLimit": 500}, NO_NOTE_ID),
    ({"noteId": "224", "tokenLimit": 500}, NO_NOTE_ID),
    ({"noteId": True, "tokenLimit": 500}, NO_NOTE_ID),
    ({"noteId": [224], "tokenLimit": 500}, NO_NOTE_ID),
    ({}, NO_NOTE_ID),
    (None, NO_NOTE_ID),
]


# -- the service: sample database, real Redis, the HTTP reader in-process -------------------------
@dataclass
class Service:
    settings: Settings
    environ: dict[str, str]  # the subprocess's environment: the same settings
    http: TestClient
    service: ContextService
    store: SnapshotStore

    def rebuild(self, *notes: int, now_ms: int | None = None) -> None:
        s = self.settings
        report = rebuild(self.service, self.store, notes, strategies=s.strategies_for("tree"),
                         seeds=s.seeds,
                         max_token_limit=s.max_token_limit, layered_limits=s.layered_limits,
                         now_ms=wall_ms() if now_ms is None else now_ms)
        assert report.errors == {}

    def graph(self, note: int, limit: int) -> httpx2.Response:  # TestClient speaks httpx2
        return self.http.get(f"/notes/{note}/graph", params={"tokenLimit": str(limit)},
                             headers={"Authorization": f"Bearer {TOKEN}"})


@contextmanager
def service_on(sample_url: str) -> Iterator[Service]:
    prefix = unique_prefix()
    with real_redis(prefix) as client:
        values = {"database_url": sample_url, "redis_url": redis_url(), "redis_prefix": prefix,
                  "token_counter": "chars", "reader_token": TOKEN}
        settings = load_settings(**values)
        environ = {f"GRAPHRAG_{key.upper()}": value for key, value in values.items()}
        with TestClient(build_http_app(settings, redis_client=client)) as http:
            yield Service(settings, environ, http, build_service(settings),
                          build_snapshot_store(settings, client))


# -- MCP clients -----------------------------------------------------------------------------------
def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(120):
            await scenario()

    anyio.run(bounded)


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1
    content = result.content[0]
    assert isinstance(content, TextContent)
    return content.text


def source_of(result: CallToolResult) -> str:
    assert not result.is_error, text_of(result)
    assert result.meta is not None and isinstance(result.meta.get("graphrag/ageSeconds"), int)
    source = result.meta.get("graphrag/source")
    assert isinstance(source, str)
    return source


async def assert_tools_listed(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == TOOLS
    for tool in tools:
        assert tool.input_schema == EXPECTED_SCHEMA
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
    graph, markdown = (t.description or "" for t in tools)
    assert graph.startswith("Retrieves the note graph - a specific note along with its surrounding "
                            "context and relationships.\n")
    assert "You MUST obtain a valid note ID first using 'find_most_relevant_note'" in graph
    assert "'get_note_graph'" in markdown and "markdown" in markdown


async def assert_same_as_http(client: Client, svc: Service, note: int, limit: int) -> None:
    reader = svc.graph(note, limit)
    assert reader.status_code == 200
    args = {"noteId": note, "tokenLimit": limit}
    graph = await client.call_tool("get_note_graph", args)
    assert text_of(graph).encode("utf-8") == reader.content
    served = reader.headers["X-Graphrag-Source"]
    assert source_of(graph) == ("cache" if served == "live" else served)  # a live read writes back
    markdown = await client.call_tool("get_note_context_markdown", args)
    assert text_of(markdown) == graph_markdown(orjson.loads(reader.content), strategy="wavefront")
    assert source_of(markdown) in ("cache", "stale")


async def assert_refusals(client: Client, svc: Service) -> None:
    for tool in TOOLS:
        for arguments, expected in BAD_ARGUMENTS:
            result = await client.call_tool(tool, arguments)
            assert (result.is_error, text_of(result)) == (True, expected), (tool, arguments)
            assert "graphrag/source" not in (result.meta or {})
        for note, limit in ((9_999, 500), (SAMPLE_FOCUS_IDS["deleted"], 500), (224, 2_000_000)):
            reader = svc.graph(note, limit)
            assert reader.status_code in (400, 404)
            result = await client.call_tool(tool, {"noteId": note, "tokenLimit": limit})
            assert result.is_error
            assert text_of(result) == f"ERROR: Graph retrieval error: {reader.text}"
        result = await client.call_tool(tool, {"noteId": 224.5, "tokenLimit": 500})
        assert result.is_error and '"parameter":"noteId"' in text_of(result)
        assert "\n" not in text_of(result)


# -- streamable HTTP -------------------------------------------------------------------------------
@dataclass
class HttpServer:
    svc: Service
    url: str


def _wait_listening(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the MCP server exited during start-up"
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError("the MCP server did not listen within 60 s")


@asynccontextmanager
async def over_http(server: HttpServer, token: str,
                    statuses: list[int] | None = None) -> AsyncIterator[Client]:
    """An MCP client with the bearer token; ``statuses`` collects every HTTP status it received."""

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    headers = {"Authorization": f"Bearer {token}"}
    async with (httpx2.AsyncClient(headers=headers, timeout=60,
                                   event_hooks={"response": [record]}) as http,
                Client(streamable_http_client(server.url, http_client=http)) as client):
        yield client
