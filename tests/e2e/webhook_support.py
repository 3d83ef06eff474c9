"""What the tests of ``POST /webhooks/note-events`` share: the secrets, the recording enqueue, the
deliveries a Standard Webhooks sender makes and the checks on the answer.

The receiver enqueues into a :class:`Recorder` (which raises ``EnqueueFailed`` on demand) and guards
replays with a :class:`~storage.redis.coordination.RedisCoordination` on fakeredis; deliveries are
signed with the ``standardwebhooks`` library. ``tests/e2e/conftest.py`` holds the fixtures built from
them (``server``, ``guard``, ``recorder`` and ``client``, the real ASGI app under TestClient).
"""

from __future__ import annotations

import base64
import datetime as dt
import os
import uuid
from typing import Any

import fakeredis
import orjson
from fastapi.testclient import TestClient
from standardwebhooks.webhooks import Webhook

from graphrag import CharsCounter, StrategyParams
from service.context import ContextService
from service.reader import ReaderConfig, SnapshotReader
from storage.profiles.doughnut_2025 import Doughnut2025 as NoteStore
from storage.redis.cache import RedisCache
from storage.redis.coordination import RedisCoordination
from storage.redis.keys import Keys
from worker.enqueue import EnqueueFailed

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
OTHER_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
TOKEN = "e2e-reader-token"
PATH = "/webhooks/note-events"
MAX_EVENTS = 1000


class Recorder:
    """The receiver's ``enqueue``: records each call's events; raises EnqueueFailed while ``down``."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []
        self.down = False
        self.attempts = 0

    def __call__(self, events: list[dict[str, Any]]) -> None:
        self.attempts += 1
        if self.down:
            raise EnqueueFailed("broker unavailable: ConnectionRefusedError")
        self.calls.append(events)


def event(note_id: Any = 42, kind: str = "note.updated", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "noteId": note_id, "occurredAt": "2026-01-01T00:00:00Z", **extra}


def payload(*events: dict[str, Any]) -> bytes:
    return orjson.dumps({"events": list(events)})


def signed(body: bytes, *, secret: str = SECRET, msg_id: str | None = None,
           at: dt.datetime | None = None) -> dict[str, str]:
    """Standard Webhooks headers for ``body`` signed with ``secret`` at ``at`` (default: now)."""
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    at = at or dt.datetime.now(dt.UTC)
    signature = Webhook(secret).sign(msg_id, at, body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": signature, "content-type": "application/json"}


def coordination(client: fakeredis.FakeRedis) -> RedisCoordination:
    return RedisCoordination(client, Keys(f"graphrag-e2e-fast:{uuid.uuid4().hex}:v1"))


def reader_on(engine: Any, guard: RedisCoordination) -> SnapshotReader:
    """A reader the webhook tests never use but the app needs (on the guard's Redis)."""
    cache = RedisCache(guard.redis, prefix=guard.keys.prefix)
    return SnapshotReader(ContextService(NoteStore(engine), CharsCounter(), StrategyParams()), cache,
                          guard, ReaderConfig())


def post(client: TestClient, body: bytes, headers: dict[str, str]) -> Any:
    response = client.post(PATH, content=body, headers=headers)
    assert response.headers["content-type"].startswith("application/json"), response.text
    assert "Traceback" not in response.text
    return response


def assert_rejected(response: Any, status: int, recorder: Recorder, *, mentions: str = "") -> None:
    assert response.status_code == status, response.text
    reason = response.json().get("error")
    assert isinstance(reason, str) and reason, response.text
    assert mentions.lower() in reason.lower(), reason
    assert recorder.calls == []
