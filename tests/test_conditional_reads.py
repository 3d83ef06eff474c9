"""Conditional reads (worker.http.conditional) on the HTTP reader: ETag, If-None-Match → 304.

The tag must change exactly when an answer's bytes change, and never be shared by two tokenLimits
or formats; a 304 never hides a change and costs no SQL. Over fakeredis (with Lua) and SQLite, as
tests/test_http.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from werkzeug.http import http_date

from tests.redis.readers import SqlCounter
from tests.support import NOW_MS
from tests.test_http import MAX_LIMIT, Service, running
from worker.http import conditional
from worker.http.conditional import CACHE_CONTROL, validators

LATER_MS = NOW_MS + 60_000  # a second rebuild's time (still before READ_AT_MS + soft TTL)


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    with running(tmp_path) as service:
        yield service


def rename(svc: Service, note_id: int, title: str) -> None:
    with svc.service.store.engine.begin() as db:  # type: ignore[attr-defined]
        db.execute(text("UPDATE note SET topic_constructor = :t WHERE id = :id"),
                   {"t": title, "id": note_id})


# -- the validators alone -------------------------------------------------------------------------
def test_the_tag_follows_the_bytes_and_the_variant() -> None:
    path, query = "/notes/10/graph", {"tokenLimit": "300", "seed": "0"}
    tag = validators(b"{}", path, query, computed_s=0).etag
    assert tag.startswith('"') and tag.endswith('"') and not tag.startswith("W/")
    assert validators(b"{}", path, {**query, "other": "x"}, computed_s=99).etag == tag
    assert validators(b"{ }", path, query, computed_s=0).etag != tag
    assert validators(b"{}", path, {**query, "tokenLimit": "301"}, computed_s=0).etag != tag
    assert validators(b"{}", "/notes/10/context.md", query, computed_s=0).etag != tag
    # the variant's length is digested, so a variant cannot borrow bytes from the body
    assert (validators(b"0{}", path, {"tokenLimit": "3"}, computed_s=0).etag
            != validators(b"{}", path, {"tokenLimit": "30"}, computed_s=0).etag)


@pytest.mark.parametrize(("header", "matches"), [
    (None, False), ("", False), ('"nope"', False), ("*", True), ("{tag}", True), ("W/{tag}", True),
    ('"nope", {tag}', True), ('W/"nope" , W/{tag}', True), ("{bare}", True), ("garbage,,", False),
])
def test_if_none_match_is_compared_weakly_as_rfc_9110_says(header: str | None,
                                                           matches: bool) -> None:
    tags = validators(b"[1]", "/notes/1/graph", {}, computed_s=0)
    given = None if header is None else header.format(tag=tags.etag, bare=tags.etag.strip('"'))
    assert tags.not_modified(given) is matches


# -- over HTTP ------------------------------------------------------------------------------------
def test_an_unchanged_snapshot_answers_304_to_its_own_etag_without_sql(svc: Service) -> None:
    svc.rebuild(10)
    first = svc.http.get("/notes/10/graph", seed="0")
    assert first.status_code == 200 and first.headers["X-Graphrag-Source"] == "cache"
    tag = first.headers["ETag"]
    assert first.headers["Last-Modified"] == http_date(NOW_MS / 1000)
    assert first.headers["Cache-Control"] == CACHE_CONTROL
    assert first.headers["Vary"] == "Authorization"
    sql = SqlCounter(svc.service.store.engine)  # type: ignore[attr-defined]
    try:
        again = svc.http.get("/notes/10/graph", seed="0", headers={"If-None-Match": tag})
    finally:
        sql.close()
    assert again.status_code == 304 and again.content == b"" and sql.count == 0
    assert (again.headers["ETag"], again.headers["X-Graphrag-Source"]) == (tag, "cache")
    assert "content-length" not in again.headers
    other = svc.http.get("/notes/10/graph", seed="0", headers={"If-None-Match": '"other"'})
    assert other.status_code == 200 and other.content == first.content


def test_a_rebuild_of_identical_bytes_keeps_the_tag_and_a_change_gives_a_new_one(
        svc: Service) -> None:
    svc.rebuild(10)
    first = svc.http.get("/notes/10/graph", seed="0")
    svc.rebuild(10, now_ms=LATER_MS)
    same = svc.http.get("/notes/10/graph", seed="0", headers={"If-None-Match": first.headers["ETag"]})
    assert same.status_code == 304 and same.headers["ETag"] == first.headers["ETag"]
    assert same.headers["Last-Modified"] == http_date(LATER_MS / 1000)
    rename(svc, 10, "Domestic cat")
    svc.rebuild(10, now_ms=LATER_MS)
    changed = svc.http.get("/notes/10/graph", seed="0",
                           headers={"If-None-Match": first.headers["ETag"]})
    assert changed.status_code == 200 and b"Domestic cat" in changed.content
    assert changed.headers["ETag"] != first.headers["ETag"]
    assert changed.content == svc.stored(10)


def test_an_outdated_snapshot_is_never_confirmed_by_its_old_tag(svc: Service) -> None:
    svc.rebuild(10)
    first = svc.http.get("/notes/10/graph", seed="0")
    rename(svc, 10, "House cat")
    svc.store.bump_generations([10])  # what an event does before the rebuild is queued
    read = svc.http.get("/notes/10/graph", seed="0", headers={"If-None-Match": first.headers["ETag"]})
    assert read.status_code == 200 and read.headers["X-Graphrag-Source"] == "live"
    assert b"House cat" in read.content and read.headers["ETag"] != first.headers["ETag"]


@pytest.mark.parametrize("note", [10, 16, 36])
def test_tokenlimits_and_formats_never_share_a_tag(svc: Service, note: int) -> None:
    svc.rebuild(note)
    answers = {}
    for path in (f"/notes/{note}/graph", f"/notes/{note}/context.md", f"/api/notes/{note}/graph",
                 f"/api/notes/{note}/ai-context-markdown"):
        for limit in ("300", "650", str(MAX_LIMIT)):
            reply = svc.http.get(path, tokenLimit=limit, seed="0")
            assert reply.status_code == 200, reply.text
            answers[path, limit] = (reply.headers["ETag"], reply.content)
            repeat = svc.http.get(path, tokenLimit=limit, seed="0",
                                  headers={"If-None-Match": reply.headers["ETag"]})
            assert repeat.status_code == 304
    tags = [tag for tag, _ in answers.values()]
    assert len(set(tags)) == len(tags)
    bodies = [body for _, body in answers.values()]
    assert len(set(bodies)) < len(bodies)  # some variants share bytes, and still not a tag


def test_the_validators_of_the_same_bytes_object_are_kept_and_of_no_other() -> None:
    """Kept by the very object answered (a hit answers the object the reader kept): the same object
    finds them, equal bytes in another object are digested again (to the same tag), another
    time of computation gives its own, and at most ``size`` are kept."""
    kept = conditional._Kept(size=3)
    body = b'{"focusNote": {}}' * 50
    first = conditional._digested(b"/v?", conditional._digest(body), 0)
    assert kept.put((b"/v?", 0), body, first) is first
    assert kept.get((b"/v?", 0), body) is first
    assert kept.get((b"/v?", 0), bytes(bytearray(body))) is None  # equal bytes, another object
    assert kept.get((b"/v?", 1), body) is None and kept.get((b"/w?", 0), body) is None
    bodies = [bytes([k]) * 10 for k in range(5)]
    for k, other in enumerate(bodies):
        kept.put((b"/v?", k), other, conditional._digested(b"/v?", conditional._digest(other), k))
    assert len(kept._kept) == 3 and kept.get((b"/v?", 0), body) is None
    assert kept.get((b"/v?", 4), bodies[-1]) == conditional._digested(
        b"/v?", conditional._digest(bodies[-1]), 4)
    tags = validators(body, "/v", {}, computed_s=0)
    assert validators(body, "/v", {}, computed_s=0) is tags
    assert validators(bytes(bytearray(body)), "/v", {}, computed_s=0).etag == tags.etag


def test_one_bytes_object_answered_at_many_variants_is_digested_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every tokenLimit from a trace's full limit on answers one kept bytes object: its digest is
    taken once, and each variant still gets a tag of its own, the one equal bytes get."""
    digested: list[int] = []
    real = conditional.hashlib.sha256

    def counting(data: bytes = b"") -> Any:
        digested.append(len(data))
        return real(data)

    monkeypatch.setattr(conditional, "_DIGESTS", conditional._Kept(size=8))
    monkeypatch.setattr(conditional.hashlib, "sha256", counting)
    body = b'{"focusNote": {}}' * 500
    tags = [validators(body, "/v", {"tokenLimit": str(k)}, computed_s=0).etag for k in range(20)]
    assert len(set(tags)) == 20
    assert digested.count(len(body)) == 1
    copy = bytes(bytearray(body))
    assert [validators(copy, "/v", {"tokenLimit": str(k)}, computed_s=0).etag
            for k in range(20)] == tags
    assert digested.count(len(body)) == 2
