"""``POST /webhooks/note-events`` input: what a delivery may carry, fast and without a worker.

The real ASGI app from :func:`worker.http.app.create_app` is driven through FastAPI's TestClient, its
receiver enqueueing into a recording list. A signed delivery of up to a thousand well-formed events
(and at most two mebibytes) is enqueued exactly once, events for unknown notes included; a malformed
payload is refused with 400 and a reason, a too large one with 413. Every refused delivery leaves the
recording empty, and a refused payload does not burn its webhook id.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import uuid

import orjson
import pytest
from fastapi.testclient import TestClient

from service.note_event import NoteEvent
from tests.e2e.webhook_support import (
    MAX_EVENTS,
    SECRET,
    Recorder,
    assert_rejected,
    event,
    payload,
    post,
    signed,
)
from worker.http.webhook import MAX_BODY_BYTES


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
    else:  # JSON is UTF-8 (RFC 8259): a body signed as bytes is refused naming its encoding
        assert_rejected(post(client, body, _raw_signed(body)), 400, recorder, mentions="UTF-8")


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
