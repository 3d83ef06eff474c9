"""Agents hear of changes: MCP subscriptions end to end, on a single Redis and on a Cluster.

Today's Doughnut in a database with a binary log, real Celery workers, ``graphrag cdc`` following the
log, and ``graphrag mcp --transport http`` as an agent would run it. Edits are plain SQL (no webhook):
change capture outdates the snapshots, the workers rebuild them, the CAS scripts publish, the MCP
server re-reads every subscribed resource of the rebuilt notes and notifies exactly those whose
bytes changed. The checks: a resource is notified if and only if its bytes changed (an edit beyond
a small tokenLimit rebuilds the note without touching that resource; an edit elsewhere touches
neither), reading it afterwards gives the new bytes, 200 sessions on one server (listen streams
and handshake-era sessions) are each notified, and a client whose stream a server restart cut
listens again and is notified after that.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost
from mcp_types import ResourceUpdatedNotification
from sqlalchemy import text

from tests.cdc.site import Site, load_2026, running
from tests.e2e.conftest import ROOT, worker_env
from tests.mcp_support import GRAPHRAG, _wait_listening
from tests.ports import free_port
from tests.reliability.support import figure
from tests.services.redis_cluster import shared_cluster

pytestmark = [pytest.mark.mariadb, pytest.mark.redis,
              pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed")]

TOKEN = "subscriptions-test-token"
LARGE, SMALL = 5000, 6
QUIET_S = 3.0

#: the protocol version whose clients listen (subscriptions/listen)
CURRENT = "2026-07-28"


def uri(note: int, limit: int, fmt: str = "json") -> str:
    tail = "&format=markdown" if fmt == "markdown" else ""
    return f"doughnut://notes/{note}/context?tokenLimit={limit}{tail}"


@dataclass
class McpSite:
    site: Site
    url: str
    port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = worker_env({**self.site.env, "GRAPHRAG_READER_TOKEN": TOKEN})
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [GRAPHRAG, "mcp", "--transport", "http", "--port", str(self.port)],
                cwd=ROOT, env={**env, "PATH": os.environ.get("PATH", "")}, stdout=log, stderr=log)
        _wait_listening(self.proc, self.port)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)

    def rows(self, sql: str) -> list[Any]:
        with self.site.wiring.source.engine.connect() as conn:  # type: ignore[attr-defined]
            return list(conn.execute(text(sql)))


@pytest.fixture(scope="module", params=["redis", "cluster"])
def mcp_site(request: pytest.FixtureRequest, binlog_server: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpSite]:
    folder = tmp_path_factory.mktemp(f"mcp-subscriptions-{request.param}")
    extra = {} if request.param == "redis" else {
        "GRAPHRAG_REDIS_URL": shared_cluster().startup_url, "GRAPHRAG_REDIS_CLUSTER": "true"}
    with running(binlog_server, folder, "doughnut-2026", load_2026, **extra) as site:
        site.cdc().await_line("following the log")
        served = McpSite(site, "", free_port(), folder / "mcp.log")
        served.url = f"http://127.0.0.1:{served.port}/mcp"
        served.start()
        try:
            yield served
        finally:
            served.stop()


@asynccontextmanager
async def client(mcp: McpSite, **options: Any) -> AsyncIterator[Client]:
    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
                Client(streamable_http_client(mcp.url, http_client=http), cache=None,
                       **options) as connected):
        yield connected


async def read(connected: Client, resource: str) -> str:
    return (await connected.read_resource(resource)).contents[0].text  # type: ignore[union-attr]


def _focus_and_neighbour(mcp: McpSite) -> tuple[int, int, int]:
    """A focus whose large context shows a neighbour, that neighbour, and a note it does not show."""
    cache, live = mcp.site.wiring.cache, [r[0] for r in mcp.rows(
        "SELECT id FROM note WHERE deleted_at IS NULL AND notebook_id IS NOT NULL ORDER BY id")]
    facts = cache.shown_by(live)
    for focus in live:
        shown = {int(f.split(":")[1]) for f in facts.get(focus, set()) if str(f).startswith("note:")}
        neighbours = sorted(shown - {focus})
        others = [n for n in live if n not in shown]
        if neighbours and others:
            return focus, neighbours[0], others[0]
    raise AssertionError("the random graph has no focus with a neighbour")


class Heard:
    """Which URIs a stream was notified of, and when."""

    def __init__(self) -> None:
        self.at: dict[str, list[float]] = {}

    def add(self, resource: str) -> None:
        self.at.setdefault(resource, []).append(time.monotonic())

    async def follow(self, stream: Any) -> None:
        async for event in stream:
            self.add(event.uri)


async def _until(check: Any, timeout_s: float, what: str) -> None:
    with anyio.fail_after(timeout_s):
        while not check():
            await anyio.sleep(0.02)


def test_a_subscriber_hears_exactly_the_changes_of_its_resources(mcp_site: McpSite) -> None:
    focus, neighbour, elsewhere = _focus_and_neighbour(mcp_site)
    watched = [uri(focus, LARGE), uri(focus, LARGE, "markdown"), uri(focus, SMALL)]
    heard = Heard()

    async def scenario() -> None:
        async with client(mcp_site) as agent, agent.listen(resource_subscriptions=watched) as stream, \
                anyio.create_task_group() as group:
            assert stream.honored.resource_subscriptions == watched
            group.start_soon(heard.follow, stream)
            before = {r: await read(agent, r) for r in watched}
            await anyio.sleep(1.0)  # the watch is in effect
            mcp_site.site.sql(f"UPDATE note SET title = 'Somewhere else' WHERE id = {elsewhere}")
            await anyio.to_thread.run_sync(mcp_site.site.settle)
            await anyio.sleep(QUIET_S)
            assert heard.at == {}, "an edit no subscribed context shows was notified"
            edited_at = time.monotonic()
            mcp_site.site.sql(f"UPDATE note SET title = 'Renamed by SQL' WHERE id = {neighbour}")
            await _until(lambda: uri(focus, LARGE) in heard.at, 60, "the large context notified")
            await anyio.to_thread.run_sync(mcp_site.site.settle)
            await anyio.sleep(QUIET_S)
            after = {r: await read(agent, r) for r in watched}
            group.cancel_scope.cancel()
        changed = {r for r in watched if after[r] != before[r]}
        assert "Renamed by SQL" in after[uri(focus, LARGE)]
        assert set(heard.at) == changed, (changed, heard.at)
        assert all(len(times) == 1 for times in heard.at.values()), heard.at
        assert uri(focus, SMALL) not in changed, "pick a smaller SMALL: it showed the neighbour"
        topology = "cluster" if mcp_site.site.env.get("GRAPHRAG_REDIS_CLUSTER") else "single"
        figure(f"mcp notification after a SQL edit ({topology})",
               f"{heard.at[uri(focus, LARGE)][0] - edited_at:.3f} s")

    anyio.run(scenario)


def _legacy_handler(heard: Heard) -> Any:
    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            heard.add(message.params.uri)
    return on_message


def test_two_hundred_sessions_on_one_server_are_each_notified(mcp_site: McpSite) -> None:
    notes = [r[0] for r in mcp_site.rows(
        "SELECT id FROM note WHERE deleted_at IS NULL AND notebook_id IS NOT NULL ORDER BY id LIMIT 4")]
    modern, legacy = [Heard() for _ in range(180)], [Heard() for _ in range(20)]

    async def listener(index: int, ready: list[int], done: anyio.Event) -> None:
        resource = uri(notes[index % len(notes)], LARGE)
        # the current protocol adopted at once: the SDK's probe falls back to the handshake era on
        # any error (a slow answer on a loaded machine), where listen does not exist
        async with client(mcp_site, mode=CURRENT) as agent, \
                agent.listen(resource_subscriptions=[resource]) as stream:
            ready.append(index)
            with anyio.move_on_after(600):
                async for event in stream:
                    modern[index].add(event.uri)
                    break
            await done.wait()

    async def session(index: int, ready: list[int], done: anyio.Event) -> None:
        resource = uri(notes[index % len(notes)], LARGE, "markdown")
        async with client(mcp_site, mode="legacy", message_handler=_legacy_handler(legacy[index])) \
                as agent:
            await agent.session.subscribe_resource(resource)
            ready.append(index)
            await done.wait()

    async def scenario() -> None:
        ready_modern: list[int] = []
        ready_legacy: list[int] = []
        done = anyio.Event()
        async with anyio.create_task_group() as group:
            for i in range(len(modern)):
                group.start_soon(listener, i, ready_modern, done)
            for i in range(len(legacy)):
                group.start_soon(session, i, ready_legacy, done)
            await _until(lambda: len(ready_modern) + len(ready_legacy) == 200, 300, "all subscribed")
            await anyio.sleep(2.0)
            statements = [f"UPDATE note SET title = CONCAT(title, ' (edited)') WHERE id = {n}"
                          for n in notes]
            await anyio.to_thread.run_sync(lambda: mcp_site.site.sql("BEGIN", *statements, "COMMIT"))
            await _until(lambda: all(h.at for h in modern + legacy), 300, "every session notified")
            done.set()
        missing = [i for i, h in enumerate(modern + legacy) if not h.at]
        figure("mcp sessions notified of one SQL transaction", f"{200 - len(missing)} / 200")
        assert missing == []

    anyio.run(scenario)


def test_after_a_server_restart_the_client_listens_again(mcp_site: McpSite) -> None:
    focus, neighbour, _ = _focus_and_neighbour(mcp_site)
    resource = uri(focus, LARGE)
    heard = Heard()

    async def first_stream() -> None:
        async with client(mcp_site) as agent, agent.listen(resource_subscriptions=[resource]) as stream:
            await anyio.to_thread.run_sync(mcp_site.stop)
            with pytest.raises(SubscriptionLost):
                async for _ in stream:
                    pass

    async def second_stream() -> None:
        async with client(mcp_site) as agent, agent.listen(resource_subscriptions=[resource]) as stream:
            await anyio.sleep(1.0)
            mcp_site.site.sql(f"UPDATE note SET title = 'After the restart' WHERE id = {neighbour}")
            with anyio.fail_after(60):
                heard.add((await stream.__anext__()).uri)  # type: ignore[union-attr]
            assert "After the restart" in await read(agent, resource)

    anyio.run(first_stream)
    mcp_site.start()
    anyio.run(second_stream)
    assert list(heard.at) == [resource]

