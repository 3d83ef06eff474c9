"""Note contexts as MCP resources, in process and in seconds: templates, reads, URIs refused with
their reason, and subscriptions in both protocol eras notified exactly when a resource's bytes
change (a source whose answers the test edits, and the in-memory change announcements).

The end-to-end proof (real workers, change capture, Redis single and Cluster, HTTP) is
tests/cdc/test_mcp_subscriptions.py.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import ResourceUpdatedNotification

from graphrag import InvalidParameter, NoteNotFound
from storage.memory import MemoryState
from storage.memory_changes import MemoryChanges
from worker.mcp.resources import NoteResource, parse_uri
from worker.mcp.server import build_server

URI = "doughnut://notes/5/context?tokenLimit=100"
MD_URI = URI + "&format=markdown"


@dataclass
class Said:
    body: bytes
    source: str = "cache"
    age_s: float = 0.0
    reason: str | None = None


class EditableSource:
    """Answers what the test sets: ``bodies[(note, limit, fmt)]``; an absent note is unknown."""

    def __init__(self) -> None:
        self.bodies: dict[tuple[int, int, str], bytes] = {}
        self.slow: dict[int, float] = {}  # note -> seconds each read of it takes

    def graph(self, note_id: int, token_limit: int) -> Said:
        return self._said(note_id, token_limit, "json")

    def markdown(self, note_id: int, token_limit: int) -> Said:
        return self._said(note_id, token_limit, "markdown")

    def _said(self, note_id: int, token_limit: int, fmt: str) -> Said:
        if note_id in self.slow:
            time.sleep(self.slow[note_id])
        body = self.bodies.get((note_id, token_limit, fmt))
        if body is None:
            raise NoteNotFound(note_id)
        return Said(body)


@pytest.fixture
def world() -> tuple[EditableSource, MemoryState]:
    source = EditableSource()
    for limit in (100, 200):
        source.bodies[(5, limit, "json")] = b'{"v": 1}'
        source.bodies[(5, limit, "markdown")] = b"# v1"
    source.bodies[(6, 100, "json")] = b'{"w": 1}'
    return source, MemoryState()


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(30):
            await scenario()
    anyio.run(bounded)


# -- URIs ------------------------------------------------------------------------------------------
def test_a_uri_names_note_limit_and_format() -> None:
    assert parse_uri(URI) == NoteResource(5, 100, "json")
    assert parse_uri(MD_URI) == NoteResource(5, 100, "markdown")
    assert NoteResource(5, 100, "markdown").uri == MD_URI


@pytest.mark.parametrize(("uri", "named"), [
    ("http://notes/5/context?tokenLimit=100", "uri"),
    ("doughnut://note/5/context?tokenLimit=100", "uri"),
    ("doughnut://notes/5/graph?tokenLimit=100", "uri"),
    ("doughnut://notes/x/context?tokenLimit=100", "noteId"),
    ("doughnut://notes/-5/context?tokenLimit=100", "noteId"),
    ("doughnut://notes/5/context", "tokenLimit"),
    ("doughnut://notes/5/context?tokenLimit=5", "tokenLimit"),
    ("doughnut://notes/5/context?tokenLimit=1.5", "tokenLimit"),
    ("doughnut://notes/5/context?tokenLimit=100&format=html", "format"),
    ("doughnut://notes/5/context?tokenLimit=100&seed=3", "uri"),
    ("doughnut://notes/5/context?tokenLimit=100&tokenLimit=200", "uri"),
    # another spelling of a valid URI: refused, naming the one spelling
    ("doughnut://notes/5/context?format=json&tokenLimit=100", URI),
    ("doughnut://notes/5/context?tokenLimit=0100", URI),
    ("doughnut://notes/05/context?tokenLimit=100", URI),
    ("doughnut://notes/5/context?format=markdown&tokenLimit=100", MD_URI),
])
def test_a_malformed_uri_is_refused_naming_what_is_wrong(uri: str, named: str) -> None:
    with pytest.raises(InvalidParameter) as refused:
        parse_uri(uri)
    assert named in str(refused.value)


# -- reads -----------------------------------------------------------------------------------------
def test_templates_and_reads(world: tuple[EditableSource, MemoryState]) -> None:
    source, state = world
    server = build_server(source, changes=MemoryChanges(state))

    async def scenario() -> None:
        async with Client(server, cache=None) as client:
            listed = await client.list_resource_templates()
            assert [t.uri_template for t in listed.resource_templates] == [
                "doughnut://notes/{noteId}/context?tokenLimit={tokenLimit}",
                "doughnut://notes/{noteId}/context?tokenLimit={tokenLimit}&format=markdown"]
            read = await client.read_resource(URI)
            assert read.contents[0].text == '{"v": 1}'  # type: ignore[union-attr]
            assert read.contents[0].mime_type == "application/json"
            read = await client.read_resource(MD_URI)
            assert read.contents[0].text == "# v1"  # type: ignore[union-attr]
            for uri, code in (("doughnut://notes/9/context?tokenLimit=100", -32002),
                              ("doughnut://notes/5/context?tokenLimit=4", -32602)):
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(uri)
                assert refused.value.error.code == code

    _run(scenario)


# -- subscriptions ---------------------------------------------------------------------------------
def test_a_listen_stream_hears_only_changed_bytes(world: tuple[EditableSource, MemoryState]) -> None:
    source, state = world
    server = build_server(source, changes=MemoryChanges(state))

    async def scenario() -> None:
        async with Client(server, cache=None) as client, \
                client.listen(resource_subscriptions=[URI, "doughnut://notes/9/context?tokenLimit=100",
                                                      "nonsense"]) as stream:
            assert stream.honored.resource_subscriptions == [URI]
            await anyio.sleep(0.5)  # the watch takes effect
            state.announce(5)  # a rebuild that wrote the same bytes
            source.bodies[(5, 200, "json")] = b'{"v": 2}'  # a change beyond this resource's limit
            state.announce(5)
            with anyio.move_on_after(1.0):
                event = await stream.__anext__()
                raise AssertionError(f"notified although the bytes did not change: {event}")
            source.bodies[(5, 100, "json")] = b'{"v": 2}'
            state.announce(5)
            with anyio.fail_after(5):
                event = await stream.__anext__()
            assert event.uri == URI  # type: ignore[union-attr]
            assert (await client.read_resource(URI)).contents[0].text == '{"v": 2}'  # type: ignore[union-attr]

    _run(scenario)


@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed")
def test_a_legacy_session_subscribes_and_unsubscribes(
    world: tuple[EditableSource, MemoryState]
) -> None:
    source, state = world
    server = build_server(source, changes=MemoryChanges(state))
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            heard.append(message.params.uri)

    async def until(count: int) -> None:
        with anyio.fail_after(5):
            while len(heard) < count:
                await anyio.sleep(0.05)

    async def scenario() -> None:
        async with Client(server, mode="legacy", message_handler=on_message, cache=None) as client:
            assert client.server_capabilities.resources.subscribe  # type: ignore[union-attr]
            await client.session.subscribe_resource(MD_URI)
            with pytest.raises(MCPError) as refused:
                await client.session.subscribe_resource("doughnut://notes/9/context?tokenLimit=100")
            assert refused.value.error.code == -32002
            await anyio.sleep(0.5)
            source.bodies[(5, 100, "markdown")] = b"# v2"
            state.announce(5)
            await until(1)
            assert heard == [MD_URI]
            await client.session.unsubscribe_resource(MD_URI)
            source.bodies[(5, 100, "markdown")] = b"# v3"
            state.announce(5)
            await anyio.sleep(1.0)
            assert heard == [MD_URI]

    _run(scenario)


def test_a_deleted_note_is_a_change_reported_once(world: tuple[EditableSource, MemoryState]) -> None:
    source, state = world
    server = build_server(source, changes=MemoryChanges(state))

    async def scenario() -> None:
        async with Client(server, cache=None) as client, \
                client.listen(resource_subscriptions=[URI]) as stream:
            await anyio.sleep(0.5)
            del source.bodies[(5, 100, "json")]
            state.announce(5)
            with anyio.fail_after(5):
                assert (await stream.__anext__()).uri == URI  # type: ignore[union-attr]
            state.announce(5)
            with anyio.move_on_after(1.0):
                raise AssertionError(f"notified twice: {await stream.__anext__()}")

    _run(scenario)


def test_a_change_while_a_listen_is_set_up_reaches_it(
    world: tuple[EditableSource, MemoryState]
) -> None:
    source, state = world
    source.slow[6] = 1.0
    server = build_server(source, changes=MemoryChanges(state))
    other = "doughnut://notes/6/context?tokenLimit=100"

    async def edit_during_the_second_read() -> None:
        await anyio.sleep(0.4)
        source.bodies[(5, 100, "json")] = b'{"v": 2}'
        state.announce(5)

    async def scenario() -> None:
        async with Client(server, cache=None) as client, anyio.create_task_group() as group:
            group.start_soon(edit_during_the_second_read)
            async with client.listen(resource_subscriptions=[URI, other]) as stream:
                with anyio.fail_after(5):
                    assert (await stream.__anext__()).uri == URI  # type: ignore[union-attr]

    _run(scenario)


def test_a_listen_given_up_while_it_is_set_up_leaves_nothing_watched(
    world: tuple[EditableSource, MemoryState]
) -> None:
    source, state = world
    source.slow[6] = 0.5
    changes = MemoryChanges(state)
    server = build_server(source, changes=changes)

    async def scenario() -> None:
        async with Client(server, cache=None) as client:
            with anyio.move_on_after(0.3):
                async with client.listen(resource_subscriptions=[
                        URI, "doughnut://notes/6/context?tokenLimit=100",
                        "doughnut://notes/6/context?tokenLimit=200"]):
                    raise AssertionError("the listen should still be setting up")
            await anyio.sleep(1.5)
            assert changes.listeners[0].watching() == set()

    _run(scenario)


@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed")
def test_a_session_that_ends_without_unsubscribing_leaves_nothing_watched(
    world: tuple[EditableSource, MemoryState]
) -> None:
    source, state = world
    changes = MemoryChanges(state)
    server = build_server(source, changes=changes)

    async def scenario() -> None:
        async with Client(server, mode="legacy", cache=None) as client:
            await client.session.subscribe_resource(URI)
            await client.session.subscribe_resource(URI)  # once per session, however often asked
            await client.session.subscribe_resource("doughnut://notes/6/context?tokenLimit=100")
            assert changes.listeners[0].watching() == {5, 6}
            await client.session.unsubscribe_resource(URI)
            assert changes.listeners[0].watching() == {6}
        await anyio.sleep(0.2)
        assert changes.listeners[0].watching() == set()

    _run(scenario)
