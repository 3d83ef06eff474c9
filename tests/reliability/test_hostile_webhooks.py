"""Hostile webhook deliveries (issue 6, item 3).

Unsigned, mis-signed, stale and future timestamps, replays, oversized, deeply nested, wrong types
-> the right 4xx and nothing enqueued; a hypothesis fuzzer of signed and unsigned deliveries checks
that exactly the 202s enqueue; an oversized body is refused without being read whole.

The app runs in-process (:mod:`tests.reliability.fuzz_app`), its receiver's ``enqueue`` records.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import hmac
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.note_event import EVENT_TYPES
from tests.reliability.fuzz_app import MAX_EVENTS, SECRET, WEBHOOK, Fuzz
from tests.reliability.fuzz_app import fuzz as fuzz  # a module fixture
from tests.reliability.support import figure, sized
from worker.http.webhook import MAX_BODY_BYTES

WEBHOOK_FUZZ = sized(ci=300, full=3_000)
OTHER_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


# -- webhooks -------------------------------------------------------------------------------------
def event(note_id: Any = 42, kind: str = "note.updated", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "noteId": note_id, "occurredAt": "2026-01-01T00:00:00Z", **extra}


def payload(*events: Any) -> bytes:
    return orjson.dumps({"events": list(events)})


def signed(body: bytes, *, secret: str = SECRET, msg_id: str | None = None,
           at: dt.datetime | None = None) -> dict[str, str]:
    """Standard Webhooks headers over ``body`` (raw bytes, as a sender hashing bytes would)."""
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    stamp = str(int((at or dt.datetime.now(dt.UTC)).timestamp()))
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    return {"webhook-id": msg_id, "webhook-timestamp": stamp,
            "webhook-signature": "v1," + base64.b64encode(digest).decode(),
            "content-type": "application/json"}


def deliver(fuzz: Fuzz, body: bytes, headers: dict[str, str], phase: str = "webhook") -> httpx.Response:
    response = fuzz.send(phase, "POST", "http://testserver" + WEBHOOK, content=body, headers=headers)
    assert response.headers["content-type"].startswith("application/json"), response.text[:200]
    return response


@pytest.fixture
def quiet(fuzz: Fuzz) -> Iterator[Fuzz]:
    """The fuzz app with an empty recording, checked empty again afterwards by the tests."""
    fuzz.recorder.calls.clear()
    yield fuzz
    fuzz.recorder.calls.clear()


def assert_refused(fuzz: Fuzz, response: httpx.Response, status: int, mentions: str = "") -> None:
    assert response.status_code == status, response.text[:500]
    reason = response.json().get("error")
    assert isinstance(reason, str) and reason, response.text[:300]
    assert mentions.lower() in reason.lower(), reason
    assert fuzz.recorder.calls == [], "a refused delivery was enqueued"


def test_a_valid_delivery_is_accepted_once(quiet: Fuzz) -> None:
    body = payload(event(7), event(8, "note.deleted"))
    response = deliver(quiet, body, signed(body))
    assert response.status_code == 202, response.text
    assert [[e["noteId"] for e in call] for call in quiet.recorder.calls] == [[7, 8]]


def _without(headers: dict[str, str], name: str) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k != name}


UNSIGNED = {
    "no-headers": lambda b: {"content-type": "application/json"},
    "no-id": lambda b: _without(signed(b), "webhook-id"),
    "no-timestamp": lambda b: _without(signed(b), "webhook-timestamp"),
    "no-signature": lambda b: _without(signed(b), "webhook-signature"),
    "empty-signature": lambda b: {**signed(b), "webhook-signature": ""},
    "other-secret": lambda b: signed(b, secret=OTHER_SECRET),
    "tampered-body": lambda b: signed(b + b" "),
    "other-id": lambda b: {**signed(b), "webhook-id": "msg_other"},
    "other-timestamp": lambda b: {**signed(b), "webhook-timestamp": str(int(time.time()) - 1)},
    "v2-signature": lambda b: {**signed(b), "webhook-signature": "v2," + signed(b)[
        "webhook-signature"].split(",", 1)[1]},
    "garbage-signature": lambda b: {**signed(b), "webhook-signature": "v1,!!!"},
    "signature-no-comma": lambda b: {**signed(b), "webhook-signature": "v1"},
    "signature-three-parts": lambda b: {**signed(b), "webhook-signature": "v1,a,b"},
    "huge-signature": lambda b: {**signed(b), "webhook-signature": "v1,AAAA " * 20_000},
    "stale-6-min": lambda b: signed(b, at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=6)),
    "stale-1-day": lambda b: signed(b, at=dt.datetime.now(dt.UTC) - dt.timedelta(days=1)),
    "epoch-0": lambda b: signed(b, at=dt.datetime.fromtimestamp(0, dt.UTC)),
    "future-6-min": lambda b: signed(b, at=dt.datetime.now(dt.UTC) + dt.timedelta(minutes=6)),
    "future-1-year": lambda b: signed(b, at=dt.datetime.now(dt.UTC) + dt.timedelta(days=366)),
    "timestamp-1e20": lambda b: {**signed(b), "webhook-timestamp": "1" + "0" * 20},
    "timestamp-negative": lambda b: {**signed(b), "webhook-timestamp": "-1"},
    "timestamp-nan": lambda b: {**signed(b), "webhook-timestamp": "nan"},
    "timestamp-inf": lambda b: {**signed(b), "webhook-timestamp": "inf"},
    "timestamp-text": lambda b: {**signed(b), "webhook-timestamp": "yesterday"},
    "timestamp-huge-digits": lambda b: {**signed(b), "webhook-timestamp": "9" * 5000},
}


@pytest.mark.parametrize("case", list(UNSIGNED))
def test_unsigned_missigned_stale_and_future_deliveries_are_401(quiet: Fuzz, case: str) -> None:
    body = payload(event())
    assert_refused(quiet, deliver(quiet, body, UNSIGNED[case](body)), 401)


def test_a_replayed_delivery_is_409_and_enqueued_once(quiet: Fuzz) -> None:
    body = payload(event(5))
    headers = signed(body)
    assert deliver(quiet, body, headers).status_code == 202
    replays = [
        (body, headers),  # byte-for-byte
        (body, signed(body, msg_id=headers["webhook-id"])),  # re-signed, fresh timestamp
        (payload(event(6)), signed(payload(event(6)), msg_id=headers["webhook-id"])),  # other body
    ]
    for again, again_headers in replays:
        response = deliver(quiet, again, again_headers)
        assert response.status_code == 409, response.text
        assert response.json()["error"]
    assert len(quiet.recorder.calls) == 1


def nested(depth: int, opening: bytes = b"[", closing: bytes = b"]") -> bytes:
    return opening * depth + closing * depth


OVERSIZED_OR_NESTED: dict[str, tuple[bytes, int]] = {
    "2-MiB-plus-one": (b'{"events":[],"pad":"' + b"x" * MAX_BODY_BYTES + b'"}', 413),
    "10-MiB": (b"[" + b"0," * (5 * 1024 * 1024) + b"0]", 413),
    "1001-events": (payload(*(event(i) for i in range(MAX_EVENTS + 1))), 413),
    "10000-nested-lists": (nested(10_000), 400),
    "10000-nested-objects": (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, 400),
    "events-10000-nested": (b'{"events":' + nested(10_000) + b"}", 400),
    "nested-beside-events": (b'{"events":[' + orjson.dumps(event()) + b'],"x":'
                             + nested(10_000) + b"}", 400),
    "nested-in-before": (b'{"events":[{"type":"note.updated","noteId":1,"occurredAt":'
                         b'"2026-01-01T00:00:00Z","before":' + nested(1_000) + b"}]}", 400),
    "nested-unclosed": (b"[" * 100_000, 400),
}


@pytest.mark.parametrize("case", list(OVERSIZED_OR_NESTED))
def test_oversized_and_deeply_nested_deliveries_are_refused(quiet: Fuzz, case: str) -> None:
    body, status = OVERSIZED_OR_NESTED[case]
    assert_refused(quiet, deliver(quiet, body, signed(body)), status)


def test_an_oversized_unsigned_delivery_is_refused(quiet: Fuzz) -> None:
    body = b"x" * (3 * 1024 * 1024)
    response = deliver(quiet, body, {"content-type": "application/json"})
    assert response.status_code in (401, 413)
    assert quiet.recorder.calls == []


WRONG_TYPES: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b"  \n",
    "null": b"null",
    "number": b"42",
    "string": b'"events"',
    "list": b"[]",
    "events-null": b'{"events":null}',
    "events-object": orjson.dumps({"events": event()}),
    "events-string": orjson.dumps({"events": "note.updated"}),
    "events-number": orjson.dumps({"events": 1}),
    "events-empty": payload(),
    "event-number": payload(42),
    "event-list": payload([event()]),
    "type-unknown": payload(event(kind="note.exploded")),
    "type-number": payload({**event(), "type": 1}),
    "type-missing": payload({"noteId": 1, "occurredAt": "2026-01-01T00:00:00Z"}),
    "noteId-string": payload(event("12")),
    "noteId-float": payload(event(1.5)),
    "noteId-integral-float": payload(event(12.0)),
    "noteId-negative": payload(event(-1)),
    "noteId-bool": payload(event(True)),
    "noteId-null": payload(event(None)),
    "noteId-list": payload(event([1])),
    "noteId-2**32": payload(event(2**32)),
    "noteId-2**64": payload(event(0)).replace(b'"noteId":0', b'"noteId":18446744073709551616'),
    "noteId-1e400": payload(event(0)).replace(b'"noteId":0', b'"noteId":1e400'),
    "noteId-10k-digits": payload(event(0)).replace(b'"noteId":0', b'"noteId":' + b"9" * 10_000),
    "occurredAt-garbage": payload(event(occurredAt="yesterday")),
    "occurredAt-number": payload(event(occurredAt=1e300)),
    "occurredAt-year-0": payload(event(occurredAt="0000-01-01T00:00:00Z")),
    "before-list": payload(event(before=[1])),
    "before-extra-key": payload(event(before={"parentId": 1, "evil": True})),
    "after-parentId-string": payload(event(after={"parentId": "1"})),
    "after-targetNoteId-negative": payload(event(after={"targetNoteId": -5})),
    "second-event-bad": payload(event(1), event("2")),
    "NaN-literal": b'{"events":[{"type":"note.updated","noteId":NaN,"occurredAt":"2026-01-01"}]}',
    "trailing-garbage": payload(event()) + b"}",
    "duplicate-events-key": b'{"events":[' + orjson.dumps(event()) + b'],"events":"x"}',
    "lone-surrogate": b'{"events":[{"type":"note.updated\\ud800","noteId":1}]}',
    "utf8-bom": b"\xef\xbb\xbf" + payload(event()),
    "invalid-utf8": b'{"events":[{"type":"note.updated","noteId":1,"x":"\xc3"}]}',
    "utf16": payload(event()).decode().encode("utf-16"),
}


@pytest.mark.parametrize("case", list(WRONG_TYPES))
def test_malformed_and_wrongly_typed_payloads_are_4xx(quiet: Fuzz, case: str) -> None:
    body = WRONG_TYPES[case]
    response = deliver(quiet, body, signed(body))
    # JSON is UTF-8 (RFC 8259): a body that is not is refused naming its encoding, a BOM as bad JSON
    assert_refused(quiet, response, 400)


def _utf8(body: bytes) -> bool:
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


# -- fuzzed webhook deliveries --------------------------------------------------------------------
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                         st.floats(allow_nan=False), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
note_ids = st.one_of(st.integers(0, 2**32 - 1), st.integers(-(2**63), 2**63 - 1), json_values)
refs = st.one_of(st.none(), json_values, st.fixed_dictionaries(
    {}, optional={"parentId": st.none() | note_ids, "targetNoteId": st.none() | note_ids}))
events = st.fixed_dictionaries(
    {}, optional={
        "type": st.sampled_from(EVENT_TYPES) | json_values, "noteId": note_ids,
        "occurredAt": st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-01", "x", ""]) | json_values,
        "before": refs, "after": refs, "extra": json_values,
    })
valid_refs = st.none() | st.fixed_dictionaries(
    {}, optional={"parentId": st.none() | st.integers(0, 2**32 - 1),
                  "targetNoteId": st.none() | st.integers(0, 2**32 - 1)})
valid_events = st.fixed_dictionaries(
    {"type": st.sampled_from(EVENT_TYPES), "noteId": st.integers(0, 2**32 - 1),
     "occurredAt": st.sampled_from(["2026-01-01T00:00:00Z", "2025-12-31T23:59:59.999+01:00"])},
    optional={"before": valid_refs, "after": valid_refs, "extra": json_values})
bodies = st.one_of(
    st.builds(lambda e: orjson.dumps({"events": e}), st.lists(events, max_size=5)),
    st.builds(lambda e: orjson.dumps({"events": e}), st.lists(valid_events, min_size=1, max_size=5)),
    st.builds(lambda e: orjson.dumps({"events": e}),
              st.lists(valid_events | events, min_size=1, max_size=5)),
    json_values.map(orjson.dumps),
    st.binary(max_size=200),
)
header_kinds = st.sampled_from(["signed", "signed", "signed", "signed", "unsigned", "other-secret",
                                "stale", "future", "garbage"])


def test_fuzzed_webhook_deliveries_enqueue_exactly_the_202s(quiet: Fuzz) -> None:
    fuzz = quiet
    seen = Counter[int]()

    @settings(max_examples=WEBHOOK_FUZZ, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(body=bodies, kind=header_kinds, junk=st.text(max_size=30))
    def one(body: bytes, kind: str, junk: str) -> None:
        now = dt.datetime.now(dt.UTC)
        headers = {
            "signed": lambda: signed(body),
            "unsigned": lambda: {"content-type": "application/json"},
            "other-secret": lambda: signed(body, secret=OTHER_SECRET),
            "stale": lambda: signed(body, at=now - dt.timedelta(minutes=10)),
            "future": lambda: signed(body, at=now + dt.timedelta(minutes=10)),
            "garbage": lambda: {**signed(body), "webhook-signature": "v1," + junk},
        }[kind]()
        before = len(fuzz.recorder.calls)
        response = deliver(fuzz, body, {k: v.encode() for k, v in headers.items()},  # type: ignore[misc]
                           "webhook fuzz")
        seen[response.status_code] += 1
        enqueued = len(fuzz.recorder.calls) - before
        if not _utf8(body):  # no signature of it can be checked: refused naming the encoding
            assert response.status_code == 400 and "UTF-8" in response.text, response.text[:300]
        elif kind != "signed":
            assert response.status_code == 401, response.text[:300]
        else:
            assert response.status_code in (202, 400, 413), response.text[:300]
        assert enqueued == (1 if response.status_code == 202 else 0)
        if response.status_code == 202:
            sent = orjson.loads(body)["events"]
            queued = fuzz.recorder.calls[-1]
            assert len(queued) == len(sent) == response.json()["accepted"]
            for e in queued:
                assert e["type"] in EVENT_TYPES and 0 <= e["noteId"] < 2**32
        else:
            assert response.json().get("error")

    one()
    figure("fuzzed webhook deliveries", f"{sum(seen.values())} ({dict(sorted(seen.items()))})")
    assert sum(seen.values()) >= WEBHOOK_FUZZ * 0.9
    assert seen[202] > 0 and seen[400] > 0 and seen[401] > 0


# -- oversized bodies are not buffered --------------------------------------------------------------


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_oversized_body_is_refused_without_reading_it_whole(fuzz: Fuzz, declared: bool) -> None:
    chunk, chunks = 1024 * 1024, 64
    pulled = 0
    sent: list[dict[str, Any]] = []
    headers = [(b"content-type", b"application/json")]
    if declared:
        headers.append((b"content-length", str(chunk * chunks).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": WEBHOOK, "raw_path": WEBHOOK.encode(), "query_string": b"",
             "root_path": "", "headers": headers, "client": ("127.0.0.1", 1),
             "server": ("testserver", 80)}

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if pulled >= chunks:
            return {"type": "http.disconnect"}
        pulled += 1
        return {"type": "http.request", "body": b"x" * chunk, "more_body": pulled < chunks}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(fuzz.app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 413
    assert pulled * chunk <= MAX_BODY_BYTES + chunk, f"read {pulled} MiB of a {chunks} MiB body"
    assert fuzz.recorder.calls == []
