"""Access changes made with plain SQL take effect within the feed's lag, by change capture alone.

Doughnut's users of tests/doughnut_users.py in a database with a binary log, ``graphrag cdc``
following it (``GRAPHRAG_CHANGE_SOURCE=cdc``: what the reader remembers about access is kept while
the access epoch holds, with no timer: service.access), and a reader in this process reading
Doughnut's path as each user. A revoked token, an ended subscription and a removed circle member
are each refused within ``GRAPHRAG_MAX_FEED_LAG_S`` (polled), and granted again once restored; in
between, a repeated read is answered from what the reader remembers, asking the database nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from graphrag import Request
from graphrag.wiki.model import Viewer
from service.doughnut_api import DoughnutRead, Refusal, answer
from service.sessions import Viewers
from storage.database import counted_statements
from storage.profiles.admin_2026 import create_tables, insert_rows
from tests.cdc.site import Site, running
from tests.doughnut_users import _rows, graph

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]

DB, NOTES = graph()


def _load(engine: Any) -> None:
    create_tables(engine)
    insert_rows(engine, _rows(DB))


class Reads:
    """Doughnut's path read in this process, as the service reads it."""

    def __init__(self, site: Site) -> None:
        self.site, self.reader = site, site.wiring.reader()
        self.viewers = Viewers(site.wiring.token_book())

    def __call__(self, note: str, token: str) -> bytes | str:
        read = DoughnutRead(str(NOTES[note]), "2000", f"tok-{token}", "json")
        try:
            return answer(self.reader, self.viewers, read).body
        except Refusal as refusal:
            return refusal.kind

    def live(self, note: str, user: int) -> bytes:
        request = Request(NOTES[note], None, 2000, 0, 2000, viewer=Viewer(user_id=user))
        return self.site.wiring.service.compute(request, "focus-context").to_json()

    def statements(self, note: str, token: str) -> int:
        engine = self.site.wiring.source.engine  # type: ignore[attr-defined]
        with counted_statements(engine) as sql:
            self(note, token)
        return sql.statements


def _within(bound_s: float, check: Callable[[], bool], what: str) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > bound_s:
            pytest.fail(f"{what} not within {bound_s} s")
        time.sleep(0.05)
    return time.monotonic() - started


@contextlib.contextmanager
def _following(binlog_server: str, tmp_path: Path) -> Iterator[tuple[Site, Reads, float]]:
    """The site with ``graphrag cdc`` following its log and the feed trusted; the reads; the
    feed's bound in seconds."""
    with running(binlog_server, tmp_path, "doughnut-2026", _load,
                 GRAPHRAG_CHANGE_SOURCE="cdc", GRAPHRAG_MAX_FEED_LAG_S="5") as site:
        site.cdc().await_line("following the log")
        reads = Reads(site)
        _within(30, lambda: reads.reader.distrust() is None, "the feed's first heartbeat")
        yield site, reads, float(site.wiring.settings.max_feed_lag_s)


def test_revoked_access_is_refused_within_the_feeds_lag_and_granted_again(
        binlog_server: str, tmp_path: Path) -> None:
    with _following(binlog_server, tmp_path) as (site, reads, bound_s):
        cases = [("A", "owner", 1, "not-logged-in",
                  "DELETE FROM user_token WHERE token = 'tok-owner'",
                  "INSERT INTO user_token (user_id, token, label) VALUES (1, 'tok-owner', 'o')"),
                 ("B", "subscriber", 2, "forbidden", "DELETE FROM subscription WHERE user_id = 2",
                  f"INSERT INTO subscription (user_id, notebook_id) VALUES (2, {_book('B')})"),
                 ("C", "member3", 3, "forbidden", "DELETE FROM circle_user WHERE user_id = 3",
                  "INSERT INTO circle_user (circle_id, user_id) VALUES (1, 3)")]
        for note, token, user, refusal, revoke, restore in cases:
            granted = reads.live(note, user)
            assert reads(note, token) == granted, (note, token)
            assert reads.statements(note, token) == 0, (note, token)  # remembered, no timer
            site.sql(revoke)
            _within(bound_s, lambda n=note, t=token, r=refusal: reads(n, t) == r,
                    f"{token} refused after {revoke!r}")
            site.sql(restore)
            _within(bound_s, lambda n=note, t=token, g=granted: reads(n, t) == g,
                    f"{token} granted again after {restore!r}")
            site.settle()  # (the rebuilds it queued done: the next case's snapshot stays put)


def test_an_owners_own_access_change_reaches_their_snapshots(
        binlog_server: str, tmp_path: Path) -> None:
    """User 4 owns M, which links to the circle's C; leaving the circle drops C from M's answer."""
    with _following(binlog_server, tmp_path) as (site, reads, bound_s):
        member = reads.live("M", 4)
        assert reads("M", "member4") == member
        site.sql("DELETE FROM circle_user WHERE user_id = 4")
        _within(bound_s, lambda: reads("M", "member4") == reads.live("M", 4) != member,
                "M's answer without the circle's notebook")
        site.settle()  # the worker rebuilt the outdated snapshot: served from it again
        assert reads("M", "member4") == reads.live("M", 4)
        assert reads.statements("M", "member4") == 0


def _book(note: str) -> int:
    found = DB.notes[NOTES[note]].notebook_id
    assert found is not None
    return found
