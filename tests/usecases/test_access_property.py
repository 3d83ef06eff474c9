"""Property: whatever access changes, every answer is the live rule's once the epoch has moved.

Random 2026 graphs (tests/storage/wiki_rows.py: two users' notebooks and a circle's) and a
random interleaving of access changes (a reader's subscriptions and circle membership, any user's
token revoked and restored) with reads of Doughnut's path by random users through their tokens.
After each change the access epoch moves, as change capture moves it when it reads the change's
rows (service.access); nothing else is told. Every read (status and bytes: the answer, or the
refusal's kind) must equal what the live rule gives that user at that moment: the token's user
now, and a live computation with that user as viewer. Note edits and deletions outdate snapshots
through the fact index, which tests/usecases/test_viewers.py and the change-capture suites cover;
they are not drawn here.

Not yet covered, and pinned as a strict expected failure: an access change of a snapshot's own
holder (the owner's circle membership or subscriptions, a notebook entering the bazaar) changes
what the owner's snapshot itself shows, and change capture outdates no snapshot for it (it moves
the epoch only). Until it does, such a snapshot is stale until its next rebuild.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphrag import CharsCounter, Request, StrategyParams
from graphrag.wiki.focus.types import NoteNotReadable
from graphrag.wiki.model import Viewer
from service.context import ContextService
from service.doughnut_api import DoughnutRead, Refusal, answer
from service.ports import TokenOwner
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from service.sessions import Viewers
from service.users import TokenBook
from storage.memory import MemoryCoordination, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_wiki import MemoryWiki
from tests.storage.wiki_rows import random_graph

STRATEGY, NOW_MS = "focus-context", 1_790_000_000_000
USERS = (1, 2, 9)
MOVES = 1
#: (the access changes of a user who holds no snapshot: user 9 owns no notebook; see the xfail below)
CHANGES = st.one_of(
    st.tuples(st.just("subscription"), st.just(9), st.integers(1, 3)),
    st.tuples(st.just("member"), st.just(9), st.just(1)),
    st.tuples(st.just("token"), st.sampled_from(USERS), st.just(0)))
READS = st.tuples(st.just("read"), st.sampled_from((*USERS, 0)), st.integers(1, 30),
                  st.sampled_from((0, 60, 700, 2000, 20_000)))


class World:
    def __init__(self, seed: int) -> None:
        self.db: MemoryWiki = random_graph(seed, notes=30)
        self.tokens = {u: TokenOwner(u, None) for u in USERS}
        self.epoch = [0]
        state = MemoryState(clock_ms=lambda: NOW_MS)
        self.service = ContextService(self.db, CharsCounter(), StrategyParams())
        cache = MemoryCache(state)
        assert rebuild(self.service, cache, self.db.live_ids_after(0, 10_000),
                       strategies=(STRATEGY,), seeds=(), max_token_limit=3000,
                       now_ms=NOW_MS).errors == {}
        config = ReaderConfig(strategies=(STRATEGY,), seeds=(), max_token_limit=3000)
        self.reader = SnapshotReader(self.service, cache, MemoryCoordination(state), config,
                                     clock_ms=lambda: NOW_MS + 1_000,
                                     epoch=lambda: self.epoch[0], verdict_ttl_ms=None)
        book = TokenBook(lambda t: self.tokens.get(int(t.removeprefix("tok-"))), ttl_ms=None,
                         clock_ms=lambda: 0, wall_ms=lambda: NOW_MS, epoch=lambda: self.epoch[0])
        self.viewers = Viewers(book)

    def change(self, kind: str, user: int, other: int) -> None:
        toggled: set[Any] = {"subscription": self.db.subscriptions, "bazaar": self.db.bazaar,
                             "member": self.db.circles.setdefault(1, set())}.get(kind, set())
        item = {"subscription": (user, other), "bazaar": other, "member": user}.get(kind)
        if kind == "token":
            self.tokens[user] = None if self.tokens.get(user) else TokenOwner(user, None)
        elif item in toggled:
            toggled.discard(item)
        else:
            toggled.add(item)
        self.epoch[0] += MOVES  # change capture read the row

    def served(self, user: int, note: int, limit: int) -> bytes | str:
        token = f"tok-{user}" if user else None
        try:
            return answer(self.reader, self.viewers,
                          DoughnutRead(str(note), str(limit), token, "json")).body
        except Refusal as refusal:
            return refusal.kind

    def rule(self, user: int, note: int, limit: int) -> bytes | str:
        owner = self.tokens.get(user) if user else None
        viewer = Viewer() if owner is None else Viewer(user_id=owner.user_id)
        if self.db.notes.get(note) is None:
            return "no-note"
        try:
            request = Request(note, None, limit, 0, limit, viewer=viewer, read_deleted=True)
            return self.service.compute(request, STRATEGY).to_json()
        except NoteNotReadable:
            return "not-logged-in" if viewer.anonymous else "forbidden"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), steps=st.lists(st.one_of(CHANGES, READS, READS), max_size=40))
def test_every_answer_is_the_live_rules_once_the_epoch_moved(seed: int, steps: list[Any]) -> None:
    world = World(seed)
    for step in steps:
        if step[0] == "read":
            _, user, note, limit = step
            assert world.served(user, note, limit) == world.rule(user, note, limit), step
        else:
            world.change(*step)


@pytest.mark.xfail(strict=True, reason="an access change of a snapshot's holder outdates nothing yet")
def test_the_owners_own_access_change_outdates_their_snapshot() -> None:
    world = World(5)  # user 1 owns note 1's notebook; a link target's notebook is the circle's
    world.change("member", 1, 1)
    assert world.served(1, 1, 0) == world.rule(1, 1, 0)
