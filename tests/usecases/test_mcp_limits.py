"""What one MCP client may hold (worker.mcp.subscriptions.Limits), and ids no number could be: each
refused with an error that names the limit or the parameter (-32602), nothing held past it, and
everything a session held let go when it ends."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from graphrag import InvalidParameter
from storage.memory import MemoryState
from storage.memory_changes import MemoryChanges
from tests.usecases.test_mcp_resources import URI, EditableSource, _run
from worker.mcp.resources import parse_uri
from worker.mcp.server import build_server
from worker.mcp.subscriptions import Limits

LIMITS = Limits(per_session=3, per_listen=4)
INVALID_PARAMS = -32602


def _source(notes: range) -> EditableSource:
    source = EditableSource()
    for note in notes:
        source.bodies[(note, 100, "json")] = b'{"n": %d}' % note
    return source


def _uri(note: int) -> str:
    return f"doughnut://notes/{note}/context?tokenLimit=100"


@pytest.mark.parametrize("digits", ["9" * 21, "9" * 4_400, "٣", "1" * 5_000])
def test_an_id_no_number_could_be_is_invalid_params(digits: str) -> None:
    with pytest.raises(InvalidParameter) as refused:
        parse_uri(f"doughnut://notes/{digits}/context?tokenLimit=100")
    assert refused.value.parameter == "noteId" and len(str(refused.value)) < 200
    with pytest.raises(InvalidParameter):
        parse_uri(f"doughnut://notes/5/context?tokenLimit={digits}")
    server = build_server(_source(range(1, 2)), changes=MemoryChanges(MemoryState()))

    async def scenario() -> None:
        async with Client(server, cache=None) as client:
            with pytest.raises(MCPError) as read:
                await client.read_resource(f"doughnut://notes/{digits}/context?tokenLimit=100")
            assert read.value.error.code == INVALID_PARAMS

    _run(scenario)


@pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed")
def test_a_session_holds_at_most_its_limit_and_lets_everything_go_when_it_ends() -> None:
    changes = MemoryChanges(MemoryState())
    server = build_server(_source(range(1, 10)), changes=changes, limits=LIMITS)

    async def scenario() -> None:
        async with Client(server, mode="legacy", cache=None) as client:
            for note in (1, 2, 3):
                await client.session.subscribe_resource(_uri(note))
            await client.session.subscribe_resource(_uri(3))  # held already: no more than before
            with pytest.raises(MCPError) as refused:
                await client.session.subscribe_resource(_uri(4))
            assert refused.value.error.code == INVALID_PARAMS
            assert "GRAPHRAG_MCP_MAX_SUBSCRIPTIONS" in refused.value.error.message
            assert changes.listeners[0].watching() == {1, 2, 3}
            await client.session.unsubscribe_resource(_uri(1))
            await client.session.subscribe_resource(_uri(4))  # room again
            assert changes.listeners[0].watching() == {2, 3, 4}
        assert changes.listeners[0].watching() == set()
        assert _held(server) == {}

    _run(scenario)


def test_a_listen_names_at_most_its_limit() -> None:
    changes = MemoryChanges(MemoryState())
    server = build_server(_source(range(1, 10)), changes=changes, limits=LIMITS)

    async def scenario() -> None:
        async with Client(server, cache=None) as client:
            with pytest.raises(MCPError) as refused:
                async with client.listen(resource_subscriptions=[_uri(n) for n in range(1, 6)]):
                    pass
            assert refused.value.error.code == INVALID_PARAMS
            assert "GRAPHRAG_MCP_MAX_LISTEN_URIS" in refused.value.error.message
            assert changes.listeners[0].watching() == set()
            async with client.listen(resource_subscriptions=[_uri(n) for n in range(1, 5)]) as stream:
                assert len(stream.honored.resource_subscriptions or ()) == 4
            assert URI not in (stream.honored.resource_subscriptions or ())

    _run(scenario)


def _held(server: Any) -> dict[object, set[str]]:
    """What the server's resource handlers (its lifespan's owner) still hold per session."""
    held: dict[object, set[str]] = server.lifespan.__self__._held
    return held
