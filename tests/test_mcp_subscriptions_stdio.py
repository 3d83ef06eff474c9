"""Subscriptions over stdio: ``graphrag mcp`` launched as an agent launches it, the sample database
and the real Redis; a rebuild after an edit the resource shows notifies the subscriber, on the
current protocol (``subscriptions/listen``) and in a handshake-era session (``resources/subscribe``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import ResourceUpdatedNotification
from sqlalchemy import create_engine, text

from storage.sample import SAMPLE_FOCUS_IDS
from tests.mcp_support import GRAPHRAG, ROOT, Service, run

pytestmark = [pytest.mark.redis, pytest.mark.usefixtures("no_inherited_settings"),
              pytest.mark.filterwarnings("ignore:resources/.*subscribe is removed")]

NOTE = SAMPLE_FOCUS_IDS["link_note"]
URI = f"doughnut://notes/{NOTE}/context?tokenLimit=1200"


@asynccontextmanager
async def over_stdio(svc: Service, errlog: TextIO, **options: Any) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=GRAPHRAG, args=["mcp"], env=svc.environ, cwd=str(ROOT))
    async with Client(stdio_client(params, errlog=errlog), cache=None, **options) as client:
        yield client


def _retitle(svc: Service, title: str) -> None:
    engine = create_engine(svc.settings.database_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE note SET topic_constructor = :t WHERE id = :id"),
                     {"t": title, "id": NOTE})
    engine.dispose()
    svc.rebuild(NOTE)


def test_a_listen_stream_over_stdio_is_notified(svc: Service, tmp_path: Path) -> None:
    svc.rebuild(NOTE)

    async def scenario() -> None:
        with (tmp_path / "stderr").open("w") as errlog:
            async with over_stdio(svc, errlog) as client, \
                    client.listen(resource_subscriptions=[URI]) as stream:
                assert stream.honored.resource_subscriptions == [URI]
                await anyio.to_thread.run_sync(_retitle, svc, "Heard over stdio")
                with anyio.fail_after(30):
                    assert (await stream.__anext__()).uri == URI  # type: ignore[union-attr]
                read = await client.read_resource(URI)
                assert "Heard over stdio" in read.contents[0].text  # type: ignore[union-attr]

    run(scenario)


def test_a_handshake_era_session_over_stdio_is_notified(svc: Service, tmp_path: Path) -> None:
    svc.rebuild(NOTE)
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            heard.append(message.params.uri)

    async def scenario() -> None:
        with (tmp_path / "stderr").open("w") as errlog:
            async with over_stdio(svc, errlog, mode="legacy", message_handler=on_message) as client:
                await client.session.subscribe_resource(URI)
                svc.rebuild(NOTE)  # the same bytes: nothing
                await anyio.sleep(1.0)
                assert heard == []
                await anyio.to_thread.run_sync(_retitle, svc, "Heard in a session")
                with anyio.fail_after(30):
                    while not heard:
                        await anyio.sleep(0.05)
                assert heard == [URI]

    run(scenario)
