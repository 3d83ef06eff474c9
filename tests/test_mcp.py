"""``graphrag mcp`` over stdio, as an agent meets it: a subprocess spoken to with the ``mcp`` client
library, on the bundled sample notebook in SQLite and the real Redis (a private key prefix, removed
afterwards). Every answer is compared with the HTTP reader (``worker.http.server.build_http_app``) built
in-process on the same database and Redis; stdout carries nothing but protocol messages. In process,
the tools' ContextSource serves a snapshot's markdown without SQL and renders every tree strategy.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import orjson
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from graphrag.tree.markdown import graph_markdown
from storage.sample import SAMPLE_FOCUS_IDS
from tests.mcp_support import (
    GRAPHRAG,
    NOTES,
    ROOT,
    TOKEN,
    Service,
    assert_refusals,
    assert_same_as_http,
    assert_tools_listed,
    run,
    source_of,
    text_of,
)
from tests.redis.readers import SqlCounter, snapshot_of
from tests.wiring import build_reader
from worker.compose import wall_ms
from worker.mcp.server import build_server
from worker.mcp.source import ReaderContext

pytestmark = [pytest.mark.redis, pytest.mark.usefixtures("no_inherited_settings")]

LIMITS = (6, 300, 1200, 5000)
DAY_MS = 86_400_000


@asynccontextmanager
async def over_stdio(svc: Service, errlog: TextIO, mode: str = "auto") -> AsyncIterator[Client]:
    params = StdioServerParameters(command=GRAPHRAG, args=["mcp"],
                                   env=svc.environ, cwd=str(ROOT))
    async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
        yield client


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
