"""``make run``: the main job end to end on the embedded default, then exit 0.

1. a fresh SQLite database with the bundled sample notebook;
2. Redis at ``GRAPHRAG_REDIS_URL`` if it answers (under a throw-away key prefix, removed at the end),
   otherwise an in-process Redis emulation (fakeredis), with a notice;
3. a real Celery worker in this process (in-memory broker) and the HTTP app in-process;
4. a full rebuild; a signed sample edit through the webhook; the rebuilt snapshot and read latency.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import uvicorn
from celery.contrib.testing.worker import start_worker
from standardwebhooks.webhooks import Webhook
from starlette.types import ASGIApp

from ops.demo_2026 import run_2026
from storage.database import open_engine
from storage.profiles import admin_2025
from storage.redis.client import build_client, delete_prefix, emulated_client, reachable
from storage.sample import SAMPLE_FOCUS_IDS, sample_notes
from worker.celery.runtime import worker_app
from worker.compose import Wiring
from worker.http.server import build_http_app
from worker.settings import Settings, load_settings

_TOKEN = "demo-reader-token"
_SECRET = "whsec_" + "ZGVtby13ZWJob29rLXNlY3JldC0wMTIzNDU2Nzg5"  # demo only


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def cache_redis(url: str, prefix: str) -> Iterator[Any]:
    """The real Redis when it answers (keys under ``prefix`` removed afterwards), else fakeredis."""
    client = build_client(url, timeout_ms=2000)
    if not reachable(client):
        say(f"notice: no Redis at {url}; using an in-process Redis emulation (fakeredis)")
        yield emulated_client()
        return
    say(f"Redis at {url} answers: using it under the key prefix {prefix}")
    try:
        yield client
    finally:
        delete_prefix(client, prefix)


def settings_for(folder: Path, prefix: str) -> Settings:
    return load_settings(
        database_url=f"sqlite:///{folder / 'sample.db'}", redis_prefix=prefix,
        broker_url="memory://localhost/", reader_token=_TOKEN, webhook_secret=_SECRET,
        strategies="wavefront,layered", debounce_ms=20,
    )


def signed(body: bytes) -> dict[str, str]:
    msg_id, now = f"msg_{uuid.uuid4().hex}", dt.datetime.now(dt.UTC)
    signature = Webhook(_SECRET).sign(msg_id, now, body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature, "content-type": "application/json"}


def read_latency_us(client: httpx.Client, note: int, reads: int = 300) -> tuple[float, float]:
    headers = {"Authorization": f"Bearer {_TOKEN}"}
    samples = []
    for _ in range(reads):
        started = time.perf_counter()
        client.get(f"/notes/{note}/graph", headers=headers)
        samples.append((time.perf_counter() - started) * 1e6)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.99) - 1]


def edit_and_wait(settings: Settings, client: httpx.Client, note: int, watch: int) -> float:
    """Rename ``note`` in the database, send the signed webhook, wait until ``watch`` shows it."""
    title = f"Miso soup (edited {dt.datetime.now(dt.UTC):%H:%M:%S})"
    engine = open_engine(settings.database_url)
    old = next(n for n in sample_notes() if n.id == note)
    admin_2025.replace_note(engine, dataclasses.replace(old, title=title))
    body = orjson.dumps({"events": [{"type": "note.updated", "noteId": note,
                                     "occurredAt": dt.datetime.now(dt.UTC).isoformat()}]})
    started = time.perf_counter()
    reply = client.post("/webhooks/note-events", content=body, headers=signed(body))
    say(f"webhook: HTTP {reply.status_code} {reply.text}")
    headers = {"Authorization": f"Bearer {_TOKEN}"}
    while time.perf_counter() - started < 30:
        answer = client.get(f"/notes/{watch}/graph", headers=headers)
        if title in answer.text and answer.headers["X-Graphrag-Source"] == "cache":
            return time.perf_counter() - started
        time.sleep(0.005)
    raise SystemExit("the edit did not reach the snapshot within 30 s")


@contextlib.contextmanager
def serving(app: ASGIApp) -> Iterator[httpx.Client]:
    """The HTTP app on a free loopback port in a thread, and a client for it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def main() -> int:
    prefix = f"graphrag-demo:{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as folder:
        settings = settings_for(Path(folder), prefix)
        url = os.environ.get("GRAPHRAG_REDIS_URL", settings.redis_url)
        with cache_redis(url, prefix) as client:
            say("== Doughnut 2025: the note tree, the seeds' strategies (wavefront, layered) ==")
            run(settings, client)
            say("\n== Today's Doughnut: folders and wiki links, focus-context ==")
            today = load_settings(
                database_url=f"sqlite:///{Path(folder) / 'sample-2026.db'}",
                redis_prefix=f"{prefix}:2026", broker_url="memory://localhost/",
                reader_token=_TOKEN, webhook_secret=_SECRET, debounce_ms=20)
            run_2026(today, client, Path(folder), _TOKEN, signed, say, serving)
            return 0


def run(settings: Settings, client: Any) -> int:
    engine = open_engine(settings.database_url)
    admin_2025.create_tables(engine)
    admin_2025.insert_notes(engine, sample_notes())
    say(f"sample notebook: {len(sample_notes())} notes in {settings.database_url}")
    wiring = Wiring(settings, redis_client=client)
    report = wiring.rebuild(n.id for n in sample_notes() if n.deleted_at is None)
    say(f"full rebuild: {report.summary()}")
    celery = worker_app(settings, redis_client=client)
    celery.conf.broker_transport_options = {"polling_interval": 0.005}  # in-memory broker: poll fast
    app = build_http_app(settings, redis_client=client, celery=celery)
    link, hub = SAMPLE_FOCUS_IDS["link_note"], SAMPLE_FOCUS_IDS["hub"]
    with start_worker(celery, pool="solo", perform_ping_check=False, loglevel="WARNING",
                      queues=["realtime", "bulk"], shutdown_timeout=60), serving(app) as http:
        p50, p99 = read_latency_us(http, hub)
        seconds = edit_and_wait(settings, http, link, watch=hub)
        answer = http.get(f"/notes/{hub}/graph?tokenLimit=600",
                          headers={"Authorization": f"Bearer {_TOKEN}"})
    print(orjson.dumps(orjson.loads(answer.content), option=orjson.OPT_INDENT_2).decode())
    say(f"edit to fresh snapshot (webhook -> worker -> Redis): {seconds * 1000:.0f} ms")
    say(f"HTTP read of a snapshot over loopback: p50 {p50:.0f} µs, p99 {p99:.0f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
