"""What a process remembers about access (service.access), and a non-owner's read built on it.

The memo keeps an answer while the access epoch it was asked under holds (and, without change
capture, no longer than its TTL). A reader remembers another viewer's verdict on a stored snapshot
(the same bytes, a refusal, computed live): the repeated read asks the database nothing and answers
as a live computation for that viewer does; a moved epoch or a rebuilt snapshot asks again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from graphrag import CharsCounter, Request, StrategyParams
from graphrag.wiki.focus.types import NoteNotReadable
from graphrag.wiki.model import Viewer
from service import answers
from service.access import Remembered
from service.cdc import ACCESS, WATCHED, events_of, touches_access
from service.context import ContextService
from service.events import outdate_shown
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from storage.memory import MemoryCoordination, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_wiki import MemoryWiki
from tests.wiki_support import H

STRATEGY, NOW_MS = "focus-context", 1_790_000_000_000


def test_an_answer_holds_while_its_epoch_does_and_within_its_ttl() -> None:
    epoch, now = [3], [0]
    memo: Remembered[str] = Remembered(epoch=lambda: epoch[0], clock_ms=lambda: now[0], ttl_ms=100)
    assert memo.get("k") == (False, None)
    started = memo.started()
    memo.put("k", "v", epoch=started[0], at_ms=started[1])
    assert memo.get("k") == (True, "v")
    now[0] = 99
    assert memo.get("k") == (True, "v")
    now[0] = 100
    assert memo.get("k") == (False, None)  # past the TTL
    memo.put("k", "v", epoch=3, at_ms=100)
    epoch[0] = 4
    assert memo.get("k") == (False, None)  # the epoch moved
    forever: Remembered[str] = Remembered(epoch=lambda: epoch[0], clock_ms=lambda: now[0],
                                          ttl_ms=None, size=2)
    for key in "abc":
        forever.put(key, key, epoch=4, at_ms=0)
    now[0] = 10**12
    assert [forever.get(k)[0] for k in "abc"] == [False, True, True]  # the oldest went first


class Row:
    def __init__(self, table: str) -> None:
        self.table, self.kind, self.before, self.after = table, "delete", {"id": 1}, None


def test_change_capture_watches_every_access_table_and_says_when_one_changed() -> None:
    assert WATCHED["wiki"] >= ACCESS
    for table in ACCESS:
        assert touches_access([Row("note"), Row(table)], model="wiki")
    assert not touches_access([Row("note"), Row("folder")], model="wiki")
    assert not touches_access([Row("notebook")], model="tree")


class Site:
    def __init__(self, *, private_link: bool = False, their_link: bool = False,
                 cache: type[MemoryCache] = MemoryCache) -> None:
        self.db = db = MemoryWiki()
        own, theirs = db.notebook("Own", user=1), db.notebook("Theirs", user=2)
        db.notebook("Stranger", user=3)
        self.focus = db.note("Focus", own, None, H + "focus [[Secret]]")
        other = db.note("Other", theirs, None, H + "other [[Focus]]")
        db.subscriptions.add((2, own))
        if private_link:  # the owner sees a note their subscriber may not
            self.secret = db.note("Secret", db.notebook("Private", user=1), None, H + "secret")
            db.link(self.focus, self.secret)
        if their_link:  # the subscriber sees a referrer the owner may not
            db.link(other, self.focus)
        self.state = MemoryState(clock_ms=lambda: NOW_MS)
        self.cache = cache(self.state)
        self.service = ContextService(db, CharsCounter(), StrategyParams())
        assert rebuild(self.service, self.cache, [self.focus], strategies=(STRATEGY,), seeds=(),
                       max_token_limit=3000, now_ms=NOW_MS).errors == {}
        self.epoch = [0]
        config = ReaderConfig(strategies=(STRATEGY,), seeds=(), max_token_limit=3000)
        self.reader = SnapshotReader(self.service, self.cache, MemoryCoordination(self.state),
                                     config, clock_ms=lambda: NOW_MS + 1_000,
                                     epoch=lambda: self.epoch[0], verdict_ttl_ms=None)

    def read(self, user: int, limit: int = 2000) -> tuple[str, bytes]:
        served = self.reader.get(self.focus, token_limit=limit, viewer=Viewer(user_id=user),
                                 doughnut=True)
        return served.source, served.body

    def live(self, user: int, limit: int = 2000) -> bytes:
        request = Request(self.focus, None, limit, 0, limit, viewer=Viewer(user_id=user))
        return self.service.compute(request, STRATEGY).to_json()


def test_a_subscribers_verdict_is_remembered_until_access_moves() -> None:
    site = Site()
    assert site.read(2) == ("cache", site.live(2))
    want = site.live(2, 700)
    asked = len(site.db.asked)
    assert site.read(2, 700) == ("cache", want)
    assert len(site.db.asked) == asked  # remembered: the read asked nothing
    site.db.subscriptions.discard((2, min(site.db.notebooks)))
    assert site.read(2)[0] == "cache"  # nothing told the reader yet
    site.epoch[0] += 1  # change capture read the subscription's row
    with pytest.raises(NoteNotReadable):
        site.read(2)


def test_a_strangers_refusal_is_remembered_and_asks_nothing() -> None:
    site = Site()
    with pytest.raises(NoteNotReadable):
        site.read(3)
    asked = len(site.db.asked)
    with pytest.raises(NoteNotReadable):
        site.read(3, 9_000)
    assert len(site.db.asked) == asked
    site.epoch[0] += 1
    with pytest.raises(NoteNotReadable):
        site.read(3)
    assert len(site.db.asked) > asked


def test_a_viewers_own_view_is_remembered_when_the_owners_facts_cover_it() -> None:
    site = Site(private_link=True)
    assert site.live(2) != site.live(1)  # the subscriber may not read the linked note
    assert site.read(2) == ("live", site.live(2))  # computed for them once
    limits = (0, 1, 700, 2000, 3000)
    wants = [("cache", site.live(2, limit)) for limit in limits]
    asked = len(site.db.asked)
    assert [site.read(2, limit) for limit in limits] == wants
    assert len(site.db.asked) == asked  # remembered: the reads asked nothing
    assert site.reader.metrics.viewer_remembered._value.get() == 5  # type: ignore[attr-defined]
    site.db.subscriptions.add((2, min(site.db.notebooks) + 3))  # now they may read it
    assert site.read(2) == wants[3]  # nothing told the reader yet: the view it remembered
    site.epoch[0] += 1  # change capture read the subscription's row
    assert site.read(2) == ("cache", site.live(2)) and site.live(2) == site.live(1)


def test_a_kept_views_replayed_answers_are_kept_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    site = Site(private_link=True)
    replays: list[int] = []
    replay = answers._replayed
    monkeypatch.setattr(answers, "_replayed",
                        lambda envelope, ask: replays.append(ask.token_limit) or replay(envelope, ask))
    assert site.read(2) == ("live", site.live(2))  # computed for them once, and kept
    wants = {limit: ("cache", site.live(2, limit)) for limit in (1, 700)}
    assert {limit: site.read(2, limit) for limit in wants} == wants
    assert replays == [1, 700]
    assert {limit: site.read(2, limit) for limit in wants} == wants
    assert replays == [1, 700]  # read again: the answers kept with the view, nothing cut again
    site.db.subscriptions.add((2, min(site.db.notebooks) + 3))  # now they may read the secret
    site.epoch[0] += 1  # access moved: the view and what was kept with it answer no more
    assert site.read(2, 700) == ("cache", site.live(2, 700)) != wants[700]


def test_a_view_reading_beyond_the_owners_facts_is_kept_and_outdated_by_an_edit_of_them() -> None:
    site = Site(their_link=True)
    assert site.live(2) != site.live(1)  # the subscriber sees their own note linking in
    assert site.read(2) == ("live", site.live(2))  # computed for them once, its extra facts watched
    want = site.live(2, 700)
    asked = len(site.db.asked)
    assert site.read(2, 700) == ("cache", want)
    assert len(site.db.asked) == asked  # remembered: the read asked nothing
    theirs = site.focus + 1
    site.db.notes[theirs] = replace(site.db.notes[theirs], content=H + "edited [[Focus]]")
    assert site.read(2, 700) == ("cache", want)  # nothing told the reader yet
    assert outdate_shown([theirs], site.cache) >= {site.focus}  # a webhook names the edited note
    assert site.read(2, 700) == ("live", site.live(2, 700))  # outdated: computed again, edit shown


class EditedInBetween(MemoryCache):
    """A cache where an edit of every fact a view watches is stamped just before the watch."""

    def watch_view(self, focus: int, facts: Any, *, ttl_ms: int) -> None:
        self.stamp_touched(facts)
        super().watch_view(focus, facts, ttl_ms=ttl_ms)


def test_a_view_whose_extra_facts_were_edited_while_it_was_computed_is_not_kept() -> None:
    site = Site(their_link=True, cache=EditedInBetween)
    assert site.read(2) == ("live", site.live(2))
    want = site.live(2, 700)
    asked = len(site.db.asked)
    assert site.read(2, 700) == ("live", want)
    assert len(site.db.asked) > asked  # the read computed again


class Changed:
    def __init__(self, table: str, before: dict[str, int] | None,
                 after: dict[str, int] | None) -> None:
        self.table, self.before, self.after = table, before, after
        self.kind = "insert" if before is None else "delete" if after is None else "update"


def test_access_rows_become_notebook_access_events() -> None:
    changes = [Changed("subscription", {"user_id": 2, "notebook_id": 5}, None),
               Changed("subscription", None, {"user_id": 3, "notebook_id": 5}),
               Changed("bazaar_notebook", None, {"notebook_id": 6}),
               Changed("circle_user", {"circle_id": 1, "user_id": 2}, {"circle_id": 4, "user_id": 2}),
               Changed("ownership", {"id": 9, "user_id": 1}, {"id": 9, "user_id": 2}),
               Changed("user_token", {"user_id": 1, "token": "t"}, None),
               Changed("notebook", {"id": 7, "name": "a", "ownership_id": 1},
                       {"id": 7, "name": "a", "ownership_id": 2}),
               Changed("notebook", {"id": 8, "name": "a", "ownership_id": 1},
                       {"id": 8, "name": "b", "ownership_id": 1})]
    events = events_of(changes, model="wiki", occurred_at="t")  # type: ignore[arg-type]
    named = [(e["type"], {k: v for k, v in e.items() if k.endswith("Id")}) for e in events]
    assert named == [("notebook.access", {"notebookId": 7}), ("notebook.renamed", {"notebookId": 8}),
                     ("notebook.access", {"notebookId": 5}), ("notebook.access", {"notebookId": 6}),
                     ("notebook.access", {"circleId": 1}), ("notebook.access", {"circleId": 4}),
                     ("notebook.access", {"ownershipId": 9})]
