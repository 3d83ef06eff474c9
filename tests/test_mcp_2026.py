"""``graphrag mcp`` on today's Doughnut: the 2026 sample in SQLite, real Redis, focus-context.

The tools carry Doughnut's texts of its FocusContext era; ``get_note_graph`` answers exactly the bytes
of ``GET /api/notes/{id}/graph`` and ``get_note_context_markdown`` exactly the markdown of
``GET /api/notes/{id}/ai-context-markdown``, over stdio and over streamable HTTP, from snapshots.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from sqlalchemy import create_engine, func, select

from storage.profiles.tables_2026 import note, note_wiki_title_cache
from tests.mcp_support import (
    GRAPHRAG,
    ROOT,
    TOKEN,
    _wait_listening,
    over_http,
    run,
    source_of,
    text_of,
)
from tests.ports import free_port
from tests.redis.readers import real_redis, redis_url, unique_prefix
from worker.http.server import build_http_app
from worker.mcp.texts import TEXTS_2026
from worker.settings import load_settings

pytestmark = pytest.mark.redis


@dataclass
class Today:
    environ: dict[str, str]
    http: TestClient
    notes: list[int]  # a hub, a linking note, a plain one

    def get(self, path: str, limit: int) -> bytes:
        reply = self.http.get(path, params={"tokenLimit": str(limit)},
                              headers={"Authorization": f"Bearer {TOKEN}"})
        assert reply.status_code == 200, reply.text
        return reply.content


def _cli(*command: str) -> None:
    done = subprocess.run([GRAPHRAG, *command], capture_output=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr


def _picked(url: str) -> list[int]:
    engine = create_engine(url)
    with engine.connect() as conn:
        c = note_wiki_title_cache.c
        hub = conn.execute(select(c.target_note_id).group_by(c.target_note_id)
                           .order_by(func.count().desc()).limit(1)).scalar_one()
        linking = conn.execute(select(c.note_id).order_by(c.id).limit(1)).scalar_one()
        plain = conn.execute(select(note.c.id).where(note.c.deleted_at.is_(None),
                                                      note.c.notebook_id.is_not(None))
                             .order_by(note.c.id.desc()).limit(1)).scalar_one()
    engine.dispose()
    return [hub, linking, plain]


@pytest.fixture(scope="module")
def today(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Today]:
    url = f"sqlite:///{tmp_path_factory.mktemp('mcp2026') / 'today.db'}"
    _cli("db", "init", "--schema", "doughnut-2026", "--db", url)
    _cli("db", "load-sample", "--schema", "doughnut-2026", "--db", url)
    prefix = unique_prefix()
    with real_redis(prefix) as client:
        values = {"database_url": url, "redis_url": redis_url(), "redis_prefix": prefix,
                  "reader_token": TOKEN}
        environ = {f"GRAPHRAG_{key.upper()}": value for key, value in values.items()}
        with TestClient(build_http_app(load_settings(**values), redis_client=client)) as http:
            yield Today(environ, http, _picked(url))


@pytest.fixture(autouse=True)
def no_inherited_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("GRAPHRAG_") and not name.startswith("GRAPHRAG_TEST_"):
            monkeypatch.delenv(name)


async def _check(client: Client, today: Today) -> None:
    tools = (await client.list_tools()).tools
    graph_tool, markdown_tool = tools
    assert graph_tool.description == TEXTS_2026.graph_description
    assert markdown_tool.description == TEXTS_2026.markdown_description
    limit_schema = graph_tool.input_schema["properties"]["tokenLimit"]
    assert limit_schema["description"] == TEXTS_2026.token_limit_description
    for note_id in today.notes:
        for limit in (6, 2000):
            args = {"noteId": note_id, "tokenLimit": limit}
            graph = await client.call_tool("get_note_graph", args)
            assert text_of(graph).encode() == today.get(f"/api/notes/{note_id}/graph", limit)
            assert source_of(graph) in ("cache", "live")
            markdown = await client.call_tool("get_note_context_markdown", args)
            served = orjson.loads(today.get(f"/api/notes/{note_id}/ai-context-markdown", limit))
            assert text_of(markdown) == served["markdown"]
            assert text_of(markdown).startswith("<focus_context>")
    refused = await client.call_tool("get_note_graph", {"noteId": today.notes[0], "tokenLimit": 5})
    assert (refused.is_error, text_of(refused)) == (True, "ERROR: tokenLimit too low to fetch any note")
    missing = await client.call_tool("get_note_graph", {"noteId": 987_654, "tokenLimit": 500})
    assert (missing.is_error, text_of(missing)) == (True, (  # Doughnut's MCP server's text for it
        'ERROR: Focus context retrieval error: {"detail":"Required path variable \'note\' is not '
        'present.","instance":"/api/notes/987654/graph","status":400,"title":"Bad Request"}'))
    halves = await client.call_tool("get_note_context_markdown", {"noteId": 2.5, "tokenLimit": 500})
    assert (halves.is_error, text_of(halves)) == (True, (
        'ERROR: Focus context retrieval error: {"detail":"Failed to convert \'note\' with value: '
        '\'2.5\'","instance":"/api/notes/2.5/ai-context-markdown","status":400,'
        '"title":"Bad Request"}'))


def test_stdio_serves_focus_context_with_todays_texts(today: Today, tmp_path: Path) -> None:
    params = StdioServerParameters(command=GRAPHRAG, args=["mcp"], env=today.environ, cwd=str(ROOT))

    async def scenario() -> None:
        with (tmp_path / "stderr").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await _check(client, today)

    run(scenario)


@dataclass
class _Server:
    url: str


@contextmanager
def _http_server(today: Today, log: Path) -> Iterator[_Server]:
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen([GRAPHRAG, "mcp", "--transport", "http", "--port", str(port)],
                                cwd=ROOT, env={**today.environ, "PATH": os.environ.get("PATH", "")},
                                stdout=out, stderr=out)
    try:
        _wait_listening(proc, port)
        yield _Server(f"http://127.0.0.1:{port}/mcp")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_http_serves_focus_context_with_todays_texts(today: Today, tmp_path: Path) -> None:
    with _http_server(today, tmp_path / "log") as server:

        async def scenario() -> None:
            async with over_http(server, TOKEN) as client:  # type: ignore[arg-type]
                await _check(client, today)

        run(scenario)
