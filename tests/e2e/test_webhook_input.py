"""``POST /webhooks/note-events`` input handling (docs/architecture.md), fast and without a worker.

The real ASGI app from :func:`worker.http.create_app` is driven through FastAPI's TestClient. Its
:class:`~worker.webhook.WebhookReceiver` enqueues into a recording list (or raises ``EnqueueFailed``
on demand) and guards replays with a :class:`~storage.redis.coordination.RedisCoordination` on
fakeredis.
Deliveries are signed with the ``standardwebhooks`` library, as a Standard Webhooks sender does.

Every rejected delivery must leave the recording empty: nothing reaches the queue unless it is
signed, fresh, new and well-formed.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fakeredis
import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from standardwebhooks.webhooks import Webhook

from graphrag import CharsCounter, StrategyParams
from graphrag.core.errors import CacheUnavailable
from service.context import ContextService
from service.envelope import SnapshotKey
from service.events import outdate_shown
from service.note_event import NoteEvent
from service.reader import ReaderConfig, SnapshotReader
from storage.database import open_engine
from storage.profiles.admin_2025 import create_tables
from storage.profiles.doughnut_2025 import Doughnut2025 as NoteStore
from storage.redis.cache import RedisCache
from storage.redis.coordination import RedisCoordination
from storage.redis.keys import Keys
from tests.contracts.test_cache import envelope
from worker.celery_app import create_celery
from worker.http import create_app
from worker.server import celery_enqueuer, outdating
from worker.settings import Settings
from worker.webhook import MAX_BODY_BYTES, EnqueueFailed, WebhookReceiver

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


@pytest.fixture
def server() -> fakeredis.FakeServer:
    return fakeredis.FakeServer()


def coordination(client: fakeredis.FakeRedis) -> RedisCoordination:
    return RedisCoordination(client, Keys(f"graphrag-e2e-fast:{uuid.uuid4().hex}:v1"))


def reader_on(engine: Any, guard: RedisCoordination) -> SnapshotReader:
    """A reader the webhook tests never use but the app needs (on the guard's Redis)."""
    cache = RedisCache(guard.redis, prefix=guard.keys.prefix)
    return SnapshotReader(ContextService(NoteStore(engine), CharsCounter(), StrategyParams()), cache,
                          guard, ReaderConfig())


@pytest.fixture
def guard(server: fakeredis.FakeServer) -> RedisCoordination:
    return coordination(fakeredis.FakeRedis(server=server))


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def client(tmp_path: Path, guard: RedisCoordination, recorder: Recorder) -> Iterator[TestClient]:
    engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
    create_tables(engine)  # the webhook never reads it: the reader needs a service all the same
    reader = reader_on(engine, guard)
    receiver = WebhookReceiver(SECRET, guard, recorder, max_events=MAX_EVENTS)
    app = create_app(reader, reader_token=TOKEN, registry=CollectorRegistry(),
                     health=lambda: {"redis": "ok"}, webhook=receiver)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client
    engine.dispose()


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


# -- accepted ------------------------------------------------------------------------------------
def test_a_valid_delivery_is_accepted_and_enqueued_exactly_once(
    client: TestClient, recorder: Recorder
) -> None:
    events = [
        event(42, "note.updated"),
        event(7, "note.moved", before={"parentId": 3, "targetNoteId": None},
              after={"parentId": 4, "targetNoteId": None}),
        event(8, "note.deleted"),
        event(9, "note.created", after={"parentId": 4}),
        event(10, "note.restored"),
    ]
    body = payload(*events)
    response = post(client, body, signed(body))
    assert response.status_code == 202, response.text
    assert response.json() == {"accepted": 5}
    assert len(recorder.calls) == 1
    queued = recorder.calls[0]
    assert [(e["type"], e["noteId"]) for e in queued] == [(e["type"], e["noteId"]) for e in events]
    moved = NoteEvent.from_json(queued[1])
    assert (moved.before_parent_id, moved.after_parent_id) == (3, 4)
    assert orjson.loads(orjson.dumps(queued)) == queued  # JSON-serializable for the broker
    assert dt.datetime.fromisoformat(queued[0]["occurredAt"]) == dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_a_thousand_events_is_the_most_one_delivery_may_carry(
    client: TestClient, recorder: Recorder
) -> None:
    body = payload(*(event(i) for i in range(MAX_EVENTS)))
    response = post(client, body, signed(body))
    assert response.status_code == 202, response.text
    assert len(recorder.calls) == 1 and len(recorder.calls[0]) == MAX_EVENTS


def test_events_for_unknown_notes_are_accepted(client: TestClient, recorder: Recorder) -> None:
    body = payload(event(4_000_000_000), event(123_456_789, "note.deleted"))
    response = post(client, body, signed(body))
    assert response.status_code == 202, response.text
    assert [e["noteId"] for e in recorder.calls[0]] == [4_000_000_000, 123_456_789]


def test_a_body_of_exactly_the_size_limit_is_accepted(client: TestClient, recorder: Recorder) -> None:
    head = b'{"events":[{"type":"note.updated","noteId":1,"occurredAt":"2026-01-01T00:00:00Z"}],"pad":"'
    body = head + b"x" * (MAX_BODY_BYTES - len(head) - 2) + b'"}'
    assert len(body) == MAX_BODY_BYTES
    response = post(client, body, signed(body))
    assert response.status_code == 202, response.text
    assert len(recorder.calls) == 1


# -- 401: signature ------------------------------------------------------------------------------
def test_an_unsigned_delivery_is_refused(client: TestClient, recorder: Recorder) -> None:
    body = payload(event())
    assert_rejected(post(client, body, {"content-type": "application/json"}), 401, recorder)


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_delivery_missing_one_header_is_refused(
    client: TestClient, recorder: Recorder, missing: str
) -> None:
    body = payload(event())
    headers = signed(body)
    del headers[missing]
    assert_rejected(post(client, body, headers), 401, recorder)


def test_a_delivery_signed_with_another_secret_is_refused(
    client: TestClient, recorder: Recorder
) -> None:
    body = payload(event())
    assert_rejected(post(client, body, signed(body, secret=OTHER_SECRET)), 401, recorder)


def test_a_tampered_body_is_refused(client: TestClient, recorder: Recorder) -> None:
    headers = signed(payload(event(42)))
    assert_rejected(post(client, payload(event(43)), headers), 401, recorder)


def test_a_signature_of_another_webhook_id_is_refused(client: TestClient, recorder: Recorder) -> None:
    body = payload(event())
    headers = signed(body)
    headers["webhook-id"] = f"msg_{uuid.uuid4().hex}"
    assert_rejected(post(client, body, headers), 401, recorder)


@pytest.mark.parametrize("offset_s", [-360, 360], ids=["6-min-old", "6-min-in-the-future"])
def test_a_timestamp_outside_five_minutes_is_refused(
    client: TestClient, recorder: Recorder, offset_s: int
) -> None:
    body = payload(event())
    at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset_s)
    assert_rejected(post(client, body, signed(body, at=at)), 401, recorder, mentions="timestamp")


@pytest.mark.parametrize("offset_s", [-240, 240], ids=["4-min-old", "4-min-in-the-future"])
def test_a_timestamp_within_five_minutes_is_accepted(
    client: TestClient, recorder: Recorder, offset_s: int
) -> None:
    body = payload(event())
    at = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=offset_s)
    assert post(client, body, signed(body, at=at)).status_code == 202
    assert len(recorder.calls) == 1


@pytest.mark.parametrize("timestamp", ["", "yesterday", "nan", "inf", "1e400"])
def test_a_garbage_timestamp_is_refused(client: TestClient, recorder: Recorder, timestamp: str) -> None:
    body = payload(event())
    headers = signed(body)
    headers["webhook-timestamp"] = timestamp
    assert_rejected(post(client, body, headers), 401, recorder)


@pytest.mark.parametrize(
    "signature",
    ["v1", "garbage", "v1,", "v1,!!!not-base64!!!", "v1,abc", "v1,a,b", "v2,{valid}", "v1;{valid}"],
)
def test_a_garbage_signature_header_is_refused(
    client: TestClient, recorder: Recorder, signature: str
) -> None:
    body = payload(event())
    headers = signed(body)
    valid = headers["webhook-signature"].split(",", 1)[1]
    headers["webhook-signature"] = signature.replace("{valid}", valid)
    assert_rejected(post(client, body, headers), 401, recorder)


def test_one_valid_signature_among_several_is_enough(client: TestClient, recorder: Recorder) -> None:
    """Standard Webhooks sends space-separated signatures while a secret is being rotated."""
    body = payload(event())
    headers = signed(body)
    old = signed(body, secret=OTHER_SECRET, msg_id=headers["webhook-id"])["webhook-signature"]
    headers["webhook-signature"] = f"{old} {headers['webhook-signature']}"
    assert post(client, body, headers).status_code == 202
    assert len(recorder.calls) == 1


def test_signature_is_checked_before_the_payload(client: TestClient, recorder: Recorder) -> None:
    """A forged delivery learns nothing about the payload rules: 401, not 400."""
    body = b"{not json"
    assert_rejected(post(client, body, signed(body, secret=OTHER_SECRET)), 401, recorder)


# -- 409: replays --------------------------------------------------------------------------------
def test_a_replayed_webhook_id_is_refused_and_not_enqueued_again(
    client: TestClient, recorder: Recorder
) -> None:
    body = payload(event())
    headers = signed(body)
    assert post(client, body, headers).status_code == 202
    assert_replay = post(client, body, headers)
    assert assert_replay.status_code == 409, assert_replay.text
    assert headers["webhook-id"] in assert_replay.json()["error"]
    # the sender's own retry: same id, a fresh timestamp and signature
    resigned = signed(body, msg_id=headers["webhook-id"])
    assert post(client, body, resigned).status_code == 409
    assert len(recorder.calls) == 1


def test_different_webhook_ids_with_the_same_events_are_both_accepted(
    client: TestClient, recorder: Recorder
) -> None:
    body = payload(event())
    assert post(client, body, signed(body)).status_code == 202
    assert post(client, body, signed(body)).status_code == 202
    assert len(recorder.calls) == 2


# -- 400: malformed payloads ---------------------------------------------------------------------
MALFORMED: dict[str, tuple[bytes, str]] = {
    "malformed-json": (b'{"events": [', "json"),
    "not-utf8-json": (b'{"events": 1, "x": "\xc3"}', ""),
    "empty-body": (b"", "json"),
    "json-null": (b"null", ""),
    "json-list": (b"[]", ""),
    "no-events": (payload(), "events"),
    "missing-events-key": (orjson.dumps({"event": [event()]}), "events"),
    "events-not-a-list": (orjson.dumps({"events": event()}), "events"),
    "events-a-string": (orjson.dumps({"events": "note.updated"}), "events"),
    "event-not-an-object": (orjson.dumps({"events": [42]}), "events.0"),
    "unknown-type": (payload(event(kind="note.exploded")), "type"),
    "missing-type": (payload({"noteId": 1, "occurredAt": "2026-01-01T00:00:00Z"}), "type"),
    "noteId-string": (payload(event("12")), "noteId"),
    "noteId-float": (payload(event(1.5)), "noteId"),
    "noteId-integral-float": (payload(event(12.0)), "noteId"),
    "noteId-negative": (payload(event(-1)), "noteId"),
    "noteId-bool": (payload(event(True)), "noteId"),
    "noteId-null": (payload(event(None)), "noteId"),
    "noteId-over-uint32": (payload(event(2**32)), "noteId"),
    "noteId-huge": (payload(event(0)).replace(b'"noteId":0', b'"noteId":99999999999999999999999'),
                    "noteId"),
    "noteId-missing": (payload({"type": "note.updated", "occurredAt": "2026-01-01T00:00:00Z"}),
                       "noteId"),
    "before-parentId-string": (payload(event(before={"parentId": "x"})), "parentId"),
    "after-targetNoteId-float": (payload(event(after={"targetNoteId": 2.5})), "targetNoteId"),
    "before-not-an-object": (payload(event(before=[1])), "before"),
    "occurredAt-garbage": (payload(event(occurredAt="yesterday")), "occurredAt"),
    "occurredAt-missing": (payload({"type": "note.updated", "noteId": 1}), "occurredAt"),
    "second-event-bad": (payload(event(1), event("2")), "events.1.noteId"),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_a_malformed_payload_is_refused_with_a_reason(
    client: TestClient, recorder: Recorder, case: str
) -> None:
    body, mentions = MALFORMED[case]
    if _utf8(body):
        assert_rejected(post(client, body, signed(body)), 400, recorder, mentions=mentions)
    else:  # JSON is UTF-8 (RFC 8259): refused either as a bad signature or as bad JSON
        response = post(client, body, _raw_signed(body))
        assert response.status_code in (400, 401), response.text
        assert response.json()["error"] and recorder.calls == []


def test_a_refused_payload_does_not_burn_its_webhook_id(
    client: TestClient, recorder: Recorder
) -> None:
    """The sender fixes the payload and retries under the same id: accepted."""
    msg_id = f"msg_{uuid.uuid4().hex}"
    bad = payload(event("12"))
    assert post(client, bad, signed(bad, msg_id=msg_id)).status_code == 400
    good = payload(event(12))
    assert post(client, good, signed(good, msg_id=msg_id)).status_code == 202
    assert len(recorder.calls) == 1


def _utf8(body: bytes) -> bool:
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


def _raw_signed(body: bytes) -> dict[str, str]:
    """Headers carrying an HMAC over raw (non-UTF-8) bytes, as a hand-rolled sender would make."""
    msg_id, now = f"msg_{uuid.uuid4().hex}", str(int(dt.datetime.now(dt.UTC).timestamp()))
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    digest = hmac.new(key, msg_id.encode() + b"." + now.encode() + b"." + body, hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": now,
            "webhook-signature": "v1," + base64.b64encode(digest).decode()}


# -- 413: too large ------------------------------------------------------------------------------
def test_more_than_a_thousand_events_is_too_large(client: TestClient, recorder: Recorder) -> None:
    body = payload(*(event(i) for i in range(MAX_EVENTS + 1)))
    assert_rejected(post(client, body, signed(body)), 413, recorder, mentions="1001")


def test_a_body_over_two_mebibytes_is_too_large(client: TestClient, recorder: Recorder) -> None:
    head = b'{"events":[{"type":"note.updated","noteId":1,"occurredAt":"2026-01-01T00:00:00Z"}],"pad":"'
    body = head + b"x" * (MAX_BODY_BYTES - len(head) - 1) + b'"}'
    assert len(body) == MAX_BODY_BYTES + 1
    assert_rejected(post(client, body, signed(body)), 413, recorder)


def test_a_huge_unsigned_body_is_refused_too(client: TestClient, recorder: Recorder) -> None:
    body = b"x" * (3 * 1024 * 1024)
    response = post(client, body, {"content-type": "application/json"})
    assert response.status_code in (401, 413), response.text
    assert recorder.calls == []


# -- 503: the queue or the replay guard is down --------------------------------------------------
def test_a_failed_enqueue_is_503_and_the_same_id_is_accepted_on_retry(
    client: TestClient, recorder: Recorder
) -> None:
    body = payload(event(5), event(6, "note.deleted"))
    headers = signed(body)
    recorder.down = True
    first = post(client, body, headers)
    assert first.status_code == 503, first.text
    assert "enqueue" in first.json()["error"]
    assert recorder.calls == []
    recorder.down = False
    retry = post(client, body, signed(body, msg_id=headers["webhook-id"]))
    assert retry.status_code == 202, retry.text
    assert len(recorder.calls) == 1 and [e["noteId"] for e in recorder.calls[0]] == [5, 6]
    assert post(client, body, headers).status_code == 409  # and now it is a replay
    assert len(recorder.calls) == 1


def test_an_unreachable_replay_guard_is_503_and_nothing_is_enqueued(
    client: TestClient, recorder: Recorder, server: fakeredis.FakeServer
) -> None:
    body = payload(event())
    headers = signed(body)
    server.connected = False
    response = post(client, body, headers)
    assert response.status_code == 503, response.text
    assert recorder.calls == [] and recorder.attempts == 0
    server.connected = True
    assert post(client, body, headers).status_code == 202
    assert len(recorder.calls) == 1


def test_without_a_secret_the_route_answers_503(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
    reader = reader_on(engine, coordination(fakeredis.FakeRedis()))
    app = create_app(reader, reader_token=TOKEN, registry=CollectorRegistry(),
                     health=lambda: {"redis": "ok"})
    body = payload(event())
    with TestClient(app, raise_server_exceptions=False) as test_client:
        response = test_client.post(PATH, content=body, headers=signed(body))
    assert response.status_code == 503
    assert "GRAPHRAG_WEBHOOK_SECRET" in response.json()["error"]
    engine.dispose()


@pytest.mark.parametrize("broker", ["redis://127.0.0.1:1/0", "amqp://guest:guest@127.0.0.1:1/"])
def test_an_unreachable_broker_is_503_through_the_real_celery_enqueuer(
    tmp_path: Path, guard: RedisCoordination, broker: str
) -> None:
    """The production enqueuer on a broker nothing listens on: 503, nothing claimed, retry works."""
    settings = Settings(**{"CELERY_BROKER_URL": broker})  # type: ignore[arg-type]
    engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
    reader = reader_on(engine, guard)
    working = Recorder()
    enqueue = celery_enqueuer(create_celery(settings))
    broker_up = False

    def switchable(events: list[dict[str, Any]]) -> None:
        (working if broker_up else enqueue)(events)

    receiver = WebhookReceiver(SECRET, guard, switchable, max_events=MAX_EVENTS)
    app = create_app(reader, reader_token=TOKEN, registry=CollectorRegistry(),
                     health=lambda: {"redis": "ok"}, webhook=receiver)
    body = payload(event())
    headers = signed(body)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        started = time.perf_counter()
        response = test_client.post(PATH, content=body, headers=headers)
        elapsed = time.perf_counter() - started
        assert response.status_code == 503, response.text
        assert "broker unavailable" in response.json()["error"]
        assert elapsed < 10, f"the 503 took {elapsed:.1f} s: a sender's request would time out"
        broker_up = True
        assert test_client.post(PATH, content=body, headers=headers).status_code == 202
    assert len(working.calls) == 1
    engine.dispose()


# -- outdating before the answer (worker.server.outdating, the server's enqueue) ------------------
def outdating_client(tmp_path: Path, guard: RedisCoordination, enqueue: Recorder,
                     outdate: Any) -> TestClient:
    engine = open_engine(f"sqlite:///{tmp_path / 'notes.db'}")
    create_tables(engine)
    receiver = WebhookReceiver(SECRET, guard, outdating(enqueue, outdate), max_events=MAX_EVENTS)
    app = create_app(reader_on(engine, guard), reader_token=TOKEN, registry=CollectorRegistry(),
                     health=lambda: {"redis": "ok"}, webhook=receiver)
    return TestClient(app, raise_server_exceptions=False)


def test_before_answering_it_outdates_every_snapshot_showing_an_edited_note(
    tmp_path: Path, guard: RedisCoordination, recorder: Recorder,
) -> None:
    cache = RedisCache(guard.redis, prefix=guard.keys.prefix)
    shows_7 = envelope(10, cache.bump_generations([10])[10], [7, 8])
    shows_8 = envelope(11, cache.bump_generations([11])[11], [8])
    assert cache.write_many([shows_7, shows_8]) == [True, True]
    with outdating_client(tmp_path, guard, recorder,
                          lambda ids: outdate_shown(ids, cache)) as client:
        body = payload(event(7), event(None, "folder.renamed", folderId=3))
        assert post(client, body, signed(body)).status_code == 202
    assert cache.read_current(SnapshotKey(10, "wavefront", 0))[1] > shows_7.generation
    assert cache.read_current(SnapshotKey(11, "wavefront", 0))[1] == shows_8.generation
    assert cache.generations([7])[7] > 0 and len(recorder.calls) == 1


def test_outdating_precedes_the_enqueue_and_its_failure_never_fails_the_delivery(
    tmp_path: Path, guard: RedisCoordination, recorder: Recorder,
) -> None:
    """Before the event task can run (and have a worker take its foci, whose writes a later bump
    would refuse), and even when the broker refuses the delivery: the edit is committed either way."""
    order: list[str] = []
    asked: list[list[int]] = []

    def outdate(ids: list[int]) -> None:
        order.append(f"outdate (enqueued so far: {recorder.attempts})")
        asked.append(ids)
        if len(asked) == 1:
            raise CacheUnavailable("redis unreachable")
        if len(asked) == 2:
            raise ValueError("a foreign value under a dep: key")  # not even a GraphRagError

    with outdating_client(tmp_path, guard, recorder, outdate) as client:
        body = payload(event(4))
        assert post(client, body, signed(body)).status_code == 202  # a CacheUnavailable
        body = payload(event(7))
        assert post(client, body, signed(body)).status_code == 202  # any other error
        assert order == ["outdate (enqueued so far: 0)", "outdate (enqueued so far: 1)"]
        asked.clear()
        recorder.calls.clear()
        bad = payload(event(5))
        assert post(client, bad, signed(bad, secret=OTHER_SECRET)).status_code == 401
        assert asked == []
        recorder.down = True
        body = payload(event(5), event(6))
        assert post(client, body, signed(body)).status_code == 503
        assert asked == [[5, 6]] and recorder.calls == []
        recorder.down = False
        assert post(client, body, signed(body)).status_code == 202
    assert asked == [[5, 6], [5, 6]] and recorder.calls == [orjson.loads(body)["events"]]
