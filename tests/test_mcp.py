"""``graphrag mcp`` as an agent meets it: a subprocess spoken to with the ``mcp`` client
library over stdio and over streamable HTTP, on the bundled sample notebook in SQLite and the real Redis
(a private key prefix, removed afterwards). Every answer is compared with the HTTP reader
(``worker.server.build_http_app``) built in-process on the same database and Redis.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx
import httpx2
import orjson
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from graphrag.tree.markdown import graph_markdown
from service.context import ContextService
from service.rebuild import rebuild
from storage.redis.cache import RedisCache as SnapshotStore
from storage.sample import SAMPLE_FOCUS_IDS
from tests.redis.readers import SqlCounter, free_port, real_redis, redis_url, snapshot_of, unique_prefix
from tests.wiring import build_reader, build_service, build_snapshot_store
from worker.compose import wall_ms
from worker.mcp_server import build_server
from worker.mcp_source import ReaderContext
from worker.server import build_http_app
from worker.settings import Settings, load_settings

pytestmark = pytest.mark.redis

ROOT = Path(__file__).resolve().parents[1]
#: The installed console script, started as an agent's configuration would start it.
GRAPHRAG = str(Path(sys.executable).with_name("graphrag"))
TOKEN = "mcp-test-reader-token"
NOTES = sorted(v for k, v in SAMPLE_FOCUS_IDS.items() if k != "deleted")
LIMITS = (6, 300, 1200, 5000)
DAY_MS = 86_400_000
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
@pytest.fixture(scope="module")
def sample_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('mcp') / 'sample.db'}"
    for command in (["db", "init"], ["db", "load-sample"]):
        done = subprocess.run([sys.executable, "-c", "from worker.cli import main; main()", *command,
                               "--db", url], capture_output=True, timeout=120, cwd=ROOT)
        assert done.returncode == 0, done.stderr
    return url


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


@pytest.fixture(autouse=True)
def no_inherited_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process reader reads only what the subprocess is given."""
    for name in list(os.environ):
        if name.startswith("GRAPHRAG_") and not name.startswith("GRAPHRAG_TEST_"):
            monkeypatch.delenv(name)


@pytest.fixture
def svc(sample_url: str) -> Iterator[Service]:
    with service_on(sample_url) as service:
        yield service


# -- MCP clients -----------------------------------------------------------------------------------
def run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(120):
            await scenario()

    anyio.run(bounded)


@asynccontextmanager
async def over_stdio(svc: Service, errlog: TextIO, mode: str = "auto") -> AsyncIterator[Client]:
    params = StdioServerParameters(command=GRAPHRAG, args=["mcp"],
                                   env=svc.environ, cwd=str(ROOT))
    async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
        yield client


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


# -- in process: the ContextSource over the reader ------------------------------------------------
def test_markdown_of_a_snapshot_runs_no_sql(svc: Service) -> None:
    svc.rebuild(224)
    context = ReaderContext(build_reader(svc.settings, svc.service, svc.store), "wavefront")
    counter = SqlCounter(svc.service.store.engine)
    try:
        answer = context.markdown(224, 1200)
    finally:
        counter.close()
    assert (answer.source, counter.count) == ("cache", 0)
    expected = graph_markdown(orjson.loads(svc.graph(224, 1200).content), strategy="wavefront")
    assert answer.body.decode("utf-8") == expected


@pytest.mark.parametrize("strategy", ["layered", "relationship-bfs"])
def test_every_tree_strategy_is_served_and_rendered(svc: Service, strategy: str) -> None:
    context = ReaderContext(build_reader(svc.settings, svc.service, svc.store), strategy)
    server = build_server(context)
    note = SAMPLE_FOCUS_IDS["link_note"]
    reader = svc.http.get(f"/notes/{note}/graph", params={"tokenLimit": "2500", "strategy": strategy},
                          headers={"Authorization": f"Bearer {TOKEN}"})
    assert reader.status_code == 200

    async def scenario() -> None:
        async with Client(server) as client:
            args = {"noteId": note, "tokenLimit": 2500}
            graph = await client.call_tool("get_note_graph", args)
            assert text_of(graph).encode("utf-8") == reader.content
            markdown = await client.call_tool("get_note_context_markdown", args)
            assert text_of(markdown) == graph_markdown(orjson.loads(reader.content), strategy=strategy)
            assert f"Strategy: {strategy} (" in text_of(markdown)

    run(scenario)


# -- stdio -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_stdio_lists_the_tools_with_doughnuts_schema_and_answers(
    svc: Service, mode: str, tmp_path: Path
) -> None:
    svc.rebuild(224)

    async def scenario() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with over_stdio(svc, errlog, mode) as client:
                await assert_tools_listed(client)
                await assert_same_as_http(client, svc, 224, 1200)

    run(scenario)


def test_stdio_results_are_the_http_readers_bytes(svc: Service, tmp_path: Path) -> None:
    svc.rebuild(*NOTES)

    async def scenario() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with over_stdio(svc, errlog) as client:
                for note in NOTES:
                    for limit in LIMITS:
                        await assert_same_as_http(client, svc, note, limit)

    run(scenario)


def test_stdio_reports_live_then_cache_and_stale(svc: Service, tmp_path: Path) -> None:
    cold, rebuilt, old = (SAMPLE_FOCUS_IDS[k] for k in ("hub", "link_note", "cjk_long"))
    svc.rebuild(rebuilt)
    two_days_ago = wall_ms() - 2 * DAY_MS
    svc.rebuild(old, now_ms=two_days_ago)
    stored = snapshot_of(svc.store, old, "wavefront", 0)
    assert stored is not None

    async def call(client: Client, note: int, limit: int = 5000) -> CallToolResult:
        return await client.call_tool("get_note_graph", {"noteId": note, "tokenLimit": limit})

    async def scenario() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with over_stdio(svc, errlog) as client:
                first, again = await call(client, cold, 700), await call(client, cold, 700)
                assert (source_of(first), source_of(again)) == ("live", "cache")
                assert text_of(first) == text_of(again)
                assert source_of(await call(client, rebuilt)) == "cache"
                stale = await call(client, old)
                assert source_of(stale) == "stale"
                assert stale.meta is not None and stale.meta["graphrag/ageSeconds"] >= 2 * 86_400 - 60
                assert text_of(stale).encode("utf-8") == orjson.dumps(stored.result)

    run(scenario)


def test_stdio_refuses_bad_arguments_with_doughnuts_texts_and_keeps_serving(
    svc: Service, tmp_path: Path
) -> None:
    async def scenario() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with over_stdio(svc, errlog) as client:
                await assert_refusals(client, svc)
                with pytest.raises(MCPError, match="no_such_tool"):
                    await client.call_tool("no_such_tool", {"noteId": 224, "tokenLimit": 500})
                await assert_same_as_http(client, svc, 224, 500)  # still serving

    run(scenario)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


def _message(proc: subprocess.Popen[bytes], request: dict[str, Any]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    assert ready, "no answer within 60 s"
    line = proc.stdout.readline()
    answer: dict[str, Any] = json.loads(line)  # a log line on stdout would fail here
    assert answer["jsonrpc"] == "2.0" and answer["id"] == request["id"]
    return answer


def test_stdout_carries_only_protocol_messages(svc: Service) -> None:
    proc = subprocess.Popen([GRAPHRAG, "mcp"], cwd=ROOT,
                            env={**svc.environ, "PATH": os.environ.get("PATH", "")},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _message(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        assert proc.stdin is not None
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        for call_id, limit in ((2, 900), (3, 5)):
            answer = _message(proc, {"jsonrpc": "2.0", "id": call_id, "method": "tools/call", "params": {
                "name": "get_note_graph", "arguments": {"noteId": 224, "tokenLimit": limit}}})
            assert answer["result"].get("isError", False) is (limit == 5)
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None and proc.stdout.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_http_transport_needs_the_reader_token(svc: Service) -> None:
    environ = {k: v for k, v in svc.environ.items() if k != "GRAPHRAG_READER_TOKEN"}
    done = subprocess.run([GRAPHRAG, "mcp", "--transport", "http"],
                          capture_output=True, timeout=60, cwd=ROOT,
                          env={**environ, "PATH": os.environ.get("PATH", "")})
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().strip().splitlines() == [
        "error: GRAPHRAG_READER_TOKEN must be set to serve MCP over HTTP"]


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


@pytest.fixture(scope="module")
def mcp_http(sample_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    port = free_port()
    with service_on(sample_url) as svc, (tmp_path_factory.mktemp("mcp-http") / "log").open("w") as log:
        proc = subprocess.Popen(
            [GRAPHRAG, "mcp", "--transport", "http", "--port", str(port)],
            cwd=ROOT, env={**svc.environ, "PATH": os.environ.get("PATH", "")},
            stdout=log, stderr=log)
        try:
            _wait_listening(proc, port)
            yield HttpServer(svc, f"http://127.0.0.1:{port}/mcp")
        finally:
            proc.terminate()
            proc.wait(timeout=30)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("authorization", [
    None, "Bearer wrong", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", TOKEN, f"Basic {TOKEN}", "Bearer",
    f"bearer {TOKEN}", f"Bearer  {TOKEN}",
])
def test_http_refuses_a_missing_or_wrong_bearer_token(
    mcp_http: HttpServer, authorization: str | None
) -> None:
    headers = dict(MCP_HEADERS) | ({} if authorization is None else {"Authorization": authorization})
    for method, url in (("POST", mcp_http.url), ("GET", mcp_http.url),
                        ("GET", mcp_http.url.replace("/mcp", "/elsewhere"))):
        response = httpx.request(method, url, json=INITIALIZE if method == "POST" else None,
                                 headers=headers, timeout=30)
        assert response.status_code == 401, (method, url)
        assert response.headers["WWW-Authenticate"] == "Bearer"
        assert response.json() == {"error": "missing or wrong bearer token"}
    accepted = httpx.post(mcp_http.url, json=INITIALIZE, timeout=30,
                          headers={**MCP_HEADERS, "Authorization": f"Bearer {TOKEN}"})
    assert accepted.status_code == 200 and accepted.json()["id"] == 1


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


def test_http_with_the_token_answers_like_the_http_reader(mcp_http: HttpServer) -> None:
    svc = mcp_http.svc
    svc.rebuild(*NOTES)

    async def scenario() -> None:
        async with over_http(mcp_http, TOKEN) as client:
            await assert_tools_listed(client)
            for note in NOTES:
                for limit in (6, 1200):
                    await assert_same_as_http(client, svc, note, limit)
            await assert_refusals(client, svc)

    run(scenario)


def _chain(err: BaseException) -> Iterator[BaseException]:
    yield err
    for inner in getattr(err, "exceptions", ()):
        yield from _chain(inner)


def test_an_mcp_client_with_a_wrong_token_cannot_connect(mcp_http: HttpServer) -> None:
    statuses: list[int] = []

    async def scenario() -> None:
        async with over_http(mcp_http, "wrong", statuses) as client:
            await client.list_tools()

    with pytest.raises(BaseException) as caught:  # the SDK wraps its MCPError in task groups
        run(scenario)
    assert any(isinstance(err, MCPError) for err in _chain(caught.value)), caught.value
    assert statuses and set(statuses) == {401}
