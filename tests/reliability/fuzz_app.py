"""The app the hostile-input suites attack (issue 6, item 3), in-process.

A SnapshotReader on fakeredis over the bundled sample notebook in SQLite, a WebhookReceiver whose
``enqueue`` records, and the reader token and webhook secret they take. :func:`fuzz` (a module
fixture) builds one per module; :class:`Fuzz` sends a request, counts it and fails on any status
>= 500 or a traceback in the response.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import fakeredis
import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry

from graphrag import CharsCounter, StrategyParams, strategy_names
from service.context import ContextService
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from storage.database import open_engine
from storage.redis.cache import RedisCache as SnapshotStore
from storage.sample import SAMPLE_FOCUS_IDS
from tests.reliability.support import sample_rows
from tests.wiring import NoteStore, coordination_of
from worker.http.app import create_app
from worker.http.webhook import WebhookReceiver

STRATEGIES = strategy_names("tree")

TOKEN = "reliability-" + uuid.uuid4().hex
AUTH = f"Bearer {TOKEN}"
SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
WEBHOOK = "/webhooks/note-events"
MAX_EVENTS = 1000
SEEDS = (0, 3)
MAX_LIMIT = 1_000


# -- the app under test ---------------------------------------------------------------------------
class Recorder:
    """The receiver's ``enqueue``: records every call's events."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    def __call__(self, events: list[dict[str, Any]]) -> None:
        self.calls.append(events)


@dataclass
class Stats:
    """Every fuzzed request, by phase and status; the server errors seen."""

    by_phase: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.by_phase.values())


@dataclass
class Fuzz:
    app: FastAPI
    client: TestClient
    recorder: Recorder
    guard: SnapshotStore
    live_ids: frozenset[int]
    deleted_ids: frozenset[int]
    stats: Stats = field(default_factory=Stats)

    def send(self, phase: str, method: str, url: str, *, params: Any = None,
             headers: dict[str, Any] | None = None, content: bytes | None = None) -> httpx.Response:
        response = self.client.request(method, url, params=params, headers=headers, content=content,
                                       follow_redirects=False)
        self.stats.by_phase[phase] += 1
        self.stats.statuses[response.status_code] += 1
        where = f"{method} {url} params={params!r:.300} headers={headers!r:.300}"
        if response.status_code >= 500:
            self.stats.server_errors.append(f"{response.status_code} {where}: {response.text[:300]}")
        assert response.status_code < 500, f"{where} -> {response.status_code}: {response.text[:500]}"
        assert "Traceback" not in response.text and 'File "' not in response.text, where
        return response


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzz]:
    engine = open_engine(f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'sample.db'}")
    notes = NoteStore(engine)
    notes.create_table()
    rows = sample_rows()
    notes.insert(rows)
    service = ContextService(notes, CharsCounter(), StrategyParams())
    store = SnapshotStore(fakeredis.FakeRedis(server=fakeredis.FakeServer()),
                          prefix=f"graphrag-fuzz:{uuid.uuid4().hex}:v1", soft_ttl_s=3_600,
                          hard_ttl_s=7_200)
    report = rebuild(service, store, list(SAMPLE_FOCUS_IDS.values())[:4], strategies=STRATEGIES,
                     seeds=SEEDS, max_token_limit=MAX_LIMIT, layered_limits=(400, MAX_LIMIT),
                     now_ms=time.time_ns() // 1_000_000)
    assert not report.errors
    config = ReaderConfig(strategies=STRATEGIES, seeds=SEEDS, max_token_limit=MAX_LIMIT,
                          layered_limits=(400, MAX_LIMIT))
    reader = SnapshotReader(service, store, coordination_of(store), config)
    recorder = Recorder()
    receiver = WebhookReceiver(SECRET, coordination_of(store), recorder, max_events=MAX_EVENTS)
    app = create_app(reader, reader_token=TOKEN, registry=CollectorRegistry(),
                     health=lambda: {"redis": "ok", "database": "ok"}, webhook=receiver)
    live = frozenset(r["id"] for r in rows if r["deleted_at"] is None)
    deleted = frozenset(r["id"] for r in rows if r["deleted_at"] is not None)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield Fuzz(app, client, recorder, store, live, deleted)
    engine.dispose()
