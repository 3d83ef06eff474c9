"""Agents hear of changes: commit → ``notifications/resources/updated`` through MCP subscriptions.

Run inside the change-capture section (:mod:`ops.bench.cdc`), with its private binlog server, worker,
``graphrag serve`` and ``graphrag cdc`` running: ``graphrag mcp --transport http`` is started beside
them and one MCP client listens (``subscriptions/listen``) to the context resource of every watched
focus. Then title edits are committed one after another with no webhook, and the clock runs from the
commit until the client holds the notification for the focus that shows the edited note: change
capture, the worker's rebuild, the CAS script's publication, the MCP server's re-read and its
notification, all in one figure.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ops.bench.graph import Graph
from ops.bench.helpers import free_port, latency_figures, listening
from ops.bench.invalidation import set_titles
from ops.bench.plan import EDIT_MARK, Bench
from ops.bench.services import Services, process_group

__all__ = ["notification_latencies"]

#: The tokenLimit of the subscribed resources (the edited note is among the first shown).
LIMIT = 4000


def _uri(focus: int) -> str:
    return f"doughnut://notes/{focus}/context?tokenLimit={LIMIT}"


def notification_latencies(bench: Bench, graph: Graph, svc: Services,
                           pairs: Sequence[tuple[int, int]], log: Path) -> dict[str, Any]:
    """ms from each commit to its notification (p50, p95, samples, timeouts)."""
    port = free_port()
    command = [sys.executable, "-c", "from worker.cli.main import main; main()", "mcp", "--transport",
               "http", "--port", str(port)]
    env = {**svc.env, "GRAPHRAG_READER_TOKEN": svc.token}
    with process_group(command, env, log, lambda: listening(port), "graphrag mcp"):
        latencies, timeouts = anyio.run(_measure, bench, graph, svc.token, port, pairs)
    return latency_figures(latencies, timeouts)


def _after(times: list[float], started: float) -> list[float]:
    """The notifications that came after ``started`` (not those of an earlier edit)."""
    return [t for t in times if t >= started]


async def _measure(bench: Bench, graph: Graph, token: str, port: int,
                   pairs: Sequence[tuple[int, int]]) -> tuple[list[float], int]:
    heard: dict[str, list[float]] = {}
    latencies: list[float] = []
    timeouts = 0
    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
                Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
                       cache=None) as agent,
                agent.listen(resource_subscriptions=[_uri(w) for _, w in pairs]) as stream,
                anyio.create_task_group() as group):
        async def record() -> None:
            async for event in stream:
                heard.setdefault(event.uri, []).append(time.perf_counter())  # type: ignore[union-attr]

        group.start_soon(record)
        await anyio.sleep(1.0)  # every watch in effect, their first look taken
        heard.clear()
        for i, (edited, watch) in enumerate(pairs):
            started = time.perf_counter()
            title = f"{EDIT_MARK} {bench.run} n{i}"
            await anyio.to_thread.run_sync(set_titles, graph, {edited: title})
            with anyio.move_on_after(bench.plan.edit_timeout_s):
                while not _after(heard.get(_uri(watch), []), started):
                    await anyio.sleep(0.005)
            if at := _after(heard.get(_uri(watch), []), started):
                latencies.append((at[0] - started) * 1000)
            else:
                timeouts += 1
        group.cancel_scope.cancel()
    return latencies, timeouts
