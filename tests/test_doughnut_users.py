"""Doughnut's own clients, unchanged, for every user (GRAPHRAG_READER_AUTH=doughnut|both).

Over a 2026 database in MariaDB and snapshots in the real Redis (tests/doughnut_users.py): the owner,
a subscriber, both members of a circle, a stranger, nobody, a bazaar notebook, an expired token, a
revoked token and a subscription that ends. Every 200 equals a live compute for that user (the
algorithm is byte-exact to Doughnut's, tests/golden), served from the owner's snapshot where the
viewer-dependent reads are proven the same (``X-Graphrag-Source: cache``) and live otherwise;
every refusal has the status and body docs/doughnut.md derives from Doughnut's code.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import orjson
import pytest
from fastapi.testclient import TestClient

from graphrag.core.errors import DatabaseUnavailable
from graphrag.wiki.model import Viewer
from service.reader import SnapshotReader
from tests.doughnut_users import SHARED, TOKEN_TTL_MS, TOKENS, Site, site

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

NOT_LOGGED_IN = b'{"message":"User Not Found","errorType":"BINDING_ERROR","errors":{}}'


@pytest.fixture(scope="module")
def users() -> Iterator[Site]:
    with site() as s:
        yield s


@pytest.fixture
def http(users: Site) -> Iterator[TestClient]:
    users.now_ms[0] += 10 * TOKEN_TTL_MS  # nothing remembered from an earlier test
    with users.client("doughnut") as client:
        yield client


def get(http: TestClient, users: Site, note: str, token: str | None, limit: str | None = "2000",
        path: str = "graph") -> tuple[int, str | None, bytes]:
    query = "" if limit is None else f"?tokenLimit={limit}"
    headers = {} if token is None else {"Authorization": f"Bearer tok-{token}"}
    note_id = users.notes.get(note, note)
    response = http.get(f"/api/notes/{note_id}/{path}{query}", headers=headers)
    assert b"Traceback" not in response.content
    return response.status_code, response.headers.get("X-Graphrag-Source"), response.content


def test_each_user_reads_their_own_view_from_the_snapshot_where_it_is_proven(
        users: Site, http: TestClient) -> None:
    owner, subscriber = Viewer(user_id=1), Viewer(user_id=2)
    assert get(http, users, "A", "owner") == (200, "cache", users.live("A", viewer=owner))
    assert get(http, users, "B", "subscriber") == (200, "cache", users.live("B", viewer=subscriber))
    # T (the subscriber's own note) refers to F: the subscriber's F differs from the owner's
    seen = get(http, users, "F", "subscriber")
    assert seen == (200, "live", users.live("F", viewer=subscriber))
    assert seen[2] != users.live("F", viewer=owner)
    member3, member4 = Viewer(user_id=3), Viewer(user_id=4)
    assert get(http, users, "C", "member3") == (200, "cache", users.live("C", viewer=member3))
    assert get(http, users, "C", "member4") == (200, "live", users.live("C", viewer=member4))
    markdown = get(http, users, "A", "owner", path="ai-context-markdown")
    assert markdown == (200, "cache", users.live("A", viewer=owner, markdown=True))


def test_another_users_remembered_answer_is_a_hot_read(
        users: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    subscriber = Viewer(user_id=2)
    gets: list[int] = []
    real_get = SnapshotReader.get
    monkeypatch.setattr(SnapshotReader, "get",
                        lambda self, *a, **k: gets.append(1) or real_get(self, *a, **k))
    with users.client("doughnut", verdict_ttl_ms=None) as http:
        assert get(http, users, "B", "subscriber") == (200, "cache", users.live("B", viewer=subscriber))
        assert len(gets) == 1  # the route proved it the owner's answer too
        for limit in (700, 2000, 1):
            want = users.live("B", limit, viewer=subscriber)
            assert get(http, users, "B", "subscriber", str(limit)) == (200, "cache", want)
        assert len(gets) == 1  # remembered: the hot read answered
        want = users.live("F", 700, viewer=subscriber)  # their own note refers to F
        assert get(http, users, "F", "subscriber", "700") == (200, "live", want)
        assert get(http, users, "F", "subscriber", "700") == (200, "cache", want)  # facts watched
        assert len(gets) == 2
        anonymous = users.live("Z", 900, viewer=Viewer())  # nobody, on a bazaar notebook's note
        assert get(http, users, "Z", None, "900")[::2] == (200, anonymous)
        assert get(http, users, "Z", None, "900")[::2] == (200, anonymous)
        assert len(gets) == 3  # the second read: remembered, hot
        assert get(http, users, "A", None)[::2] == (401, NOT_LOGGED_IN)  # refused by the route
        assert get(http, users, "A", None)[::2] == (401, NOT_LOGGED_IN)
        assert len(gets) == 5


def test_refusals_are_doughnuts(users: Site, http: TestClient) -> None:
    status, _, content = get(http, users, "A", "stranger")
    refused = orjson.loads(content)
    assert status == 403 and list(refused) == ["timestamp", "status", "error", "path"]
    assert (refused["status"], refused["error"], refused["path"]) == (
        403, "Forbidden", f"/api/notes/{users.notes['A']}/graph")
    assert get(http, users, "A", None)[::2] == (401, NOT_LOGGED_IN)
    assert get(http, users, "A", "nobody-knows-this")[::2] == (401, NOT_LOGGED_IN)
    assert get(http, users, "A", "expired")[::2] == (401, NOT_LOGGED_IN)  # refused like a bad one
    anonymous = Viewer()
    assert get(http, users, "Z", None)[::2] == (200, users.live("Z", viewer=anonymous))
    assert get(http, users, "Z", "expired")[::2] == (200, users.live("Z", viewer=anonymous))


@pytest.mark.parametrize(("note", "limit", "detail"), [
    ("A", None, "Required parameter 'tokenLimit' is not present."),
    ("A", "abc", "Failed to convert 'tokenLimit' with value: 'abc'"),
    ("A", "99999999999", "Failed to convert 'tokenLimit' with value: '99999999999'"),
    ("abc", "2000", "Failed to convert 'note' with value: 'abc'"),
    ("99999", "2000", "Required path variable 'note' is not present."),
    ("99999", None, "Required path variable 'note' is not present."),  # the path is bound first
])
def test_bad_parameters_are_springs_problem_details(
        users: Site, http: TestClient, note: str, limit: str | None, detail: str) -> None:
    note_id = users.notes.get(note, note)
    for token in ("owner", None):  # binding comes before any login check
        status, _, content = get(http, users, note, token, limit)
        assert status == 400
        assert content == (b'{"detail":"' + detail.encode() + b'","instance":"/api/notes/'
                           + str(note_id).encode() + b'/graph","status":400,"title":"Bad Request"}')


def test_zero_negative_hex_limits_and_a_deleted_note_answer_as_doughnut_does(
        users: Site, http: TestClient) -> None:
    owner = Viewer(user_id=1)
    zero = users.live("A", 0, viewer=owner)
    assert get(http, users, "A", "owner", "0")[::2] == (200, zero)
    assert get(http, users, "A", "owner", "-7")[::2] == (200, zero)
    assert get(http, users, "A", "owner", "0x10")[::2] == (200, users.live("A", 16, viewer=owner))
    for huge in (2_000_000, 2**31 - 1):  # any Java int, as Doughnut takes it
        assert get(http, users, "A", "owner", str(huge))[::2] == (200, users.live(
            "A", huge, viewer=owner))
    assert get(http, users, "E", "owner") == (200, "live", users.live("E", viewer=owner))
    assert get(http, users, "E", None)[::2] == (401, NOT_LOGGED_IN)


def test_a_revoked_token_is_refused_within_the_cache_delay(users: Site, http: TestClient) -> None:
    owner = Viewer(user_id=1)
    assert get(http, users, "A", "revoked")[::2] == (200, users.live("A", viewer=owner))
    users.sql("DELETE FROM user_token WHERE token = 'tok-revoked'")
    users.now_ms[0] += TOKEN_TTL_MS - 1
    assert get(http, users, "A", "revoked")[0] == 200  # remembered for GRAPHRAG_TOKEN_CACHE_S
    users.now_ms[0] += 1
    assert get(http, users, "A", "revoked")[::2] == (401, NOT_LOGGED_IN)


def test_a_subscription_that_ends_is_refused_at_once(users: Site, http: TestClient) -> None:
    assert get(http, users, "B", "subscriber")[0] == 200
    users.sql("DELETE FROM subscription WHERE user_id = 2")
    try:
        assert get(http, users, "B", "subscriber")[0] == 403  # the token is remembered, not access
    finally:
        users.sql(f"INSERT INTO subscription (user_id, notebook_id) VALUES "
                  f"(2, (SELECT notebook_id FROM note WHERE id = {users.notes['A']}))")


def test_tokens_never_reach_the_logs_and_lookups_are_counted(
        users: Site, http: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    before = list(users.lookups)
    with caplog.at_level(logging.DEBUG):
        for token in TOKENS:
            get(http, users, "A", token)
        get(http, users, "A", "no-such-token")
    assert not any("tok-" in r.getMessage() for r in caplog.records)
    assert sorted(set(users.lookups[len(before):])) == ["expired", "unknown", "user"]


def test_a_database_fault_answers_503_never_allowed(users: Site) -> None:
    def down(_token: str) -> None:
        raise DatabaseUnavailable("database unreachable: connection refused")

    with users.client("doughnut", lookup=down) as client:
        response = client.get(f"/api/notes/{users.notes['A']}/graph?tokenLimit=2000",
                              headers={"Authorization": "Bearer tok-owner"})
    assert response.status_code == 503 and b"database" in response.content
    assert users.lookups[-1] == "error"  # graphrag_token_lookups_total{outcome="error"}


def test_both_modes_keep_the_shared_token_for_the_main_app(users: Site) -> None:
    owner = Viewer(user_id=1)
    with users.client("both") as client:
        shared = client.get(f"/api/notes/{users.notes['A']}/graph?tokenLimit=2000",
                            headers={"Authorization": f"Bearer {SHARED}"})
        assert (shared.status_code, shared.content) == (200, users.live("A", viewer=owner))
        own_path = client.get(f"/notes/{users.notes['A']}/graph",
                              headers={"Authorization": "Bearer tok-owner"})
        assert own_path.status_code == 401  # a user's token opens Doughnut's paths only
    with users.client("doughnut") as client:
        assert client.get(f"/notes/{users.notes['A']}/graph",
                          headers={"Authorization": f"Bearer {SHARED}"}).status_code == 401


def test_a_users_conditional_read_is_confirmed_and_a_refusal_carries_no_tag(
        users: Site, http: TestClient) -> None:
    path = f"/api/notes/{users.notes['A']}/graph?tokenLimit=2000"
    first = http.get(path, headers={"Authorization": "Bearer tok-owner"})
    assert first.status_code == 200 and first.headers["ETag"]
    again = http.get(path, headers={"Authorization": "Bearer tok-owner",
                                    "If-None-Match": first.headers["ETag"]})
    assert (again.status_code, again.content) == (304, b"")
    refused = http.get(path, headers={"Authorization": "Bearer tok-stranger",
                                      "If-None-Match": first.headers["ETag"]})
    assert refused.status_code == 403 and "ETag" not in refused.headers
