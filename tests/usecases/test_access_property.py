"""Property: whatever access changes, every answer is the live rule's once change capture told it.

Random 2026 graphs (tests/storage/wiki_rows.py: two users' notebooks and a circle's) and a random
interleaving of access changes (subscriptions, circle members, the bazaar, a token revoked and
restored), note deletions, restores and edits with reads of Doughnut's path by random users through
their tokens. Each change is told
as change capture tells it: its rows become events (service.cdc.events_of), which the worker
records (service.events: the snapshots they affect are outdated), and the access epoch moves
(service.access). Every read (status and bytes: the answer, or the refusal's kind) must equal what
the live rule gives that user at that moment: the token's user now, and a live computation with
that user as viewer. A deletion or an edit is told the same way (a ``note`` row whose
``deleted_at`` or content changed): it outdates snapshots through the fact index and leaves the
access epoch alone, so a remembered verdict or view must be retired by the snapshot's new
generation, found through the fact index or, for a view that read a note the owner's did not,
through the facts the reader watches for it.
It runs 100 examples in the suite and 1,000 in the reliability loop (``make test-reliability``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphrag import CharsCounter, Request, StrategyParams
from graphrag.wiki.focus.types import NoteNotReadable
from graphrag.wiki.model import Viewer
from service.cdc import events_of, touches_access
from service.context import ContextService
from service.doughnut_api import DoughnutRead, Refusal, answer
from service.events import record_events
from service.note_event import NoteEvent
from service.ports import TokenOwner
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from service.sessions import Viewers
from service.users import TokenBook
from storage.memory import MemoryCoordination, MemoryDirtySet, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_wiki import MemoryWiki
from tests.reliability.support import sized
from tests.storage.wiki_rows import random_graph
from tests.wiki_support import H

STRATEGY, NOW_MS = "focus-context", 1_790_000_000_000
USERS = (1, 2, 9)
#: notes per graph: few enough that reads and edits meet on the same notes and their referrers
NOTES = 12
#: how far the access epoch moves per transaction that touches access (0: a broken feed)
MOVES = 1
CHANGES = st.one_of(
    st.tuples(st.just("subscription"), st.sampled_from(USERS), st.integers(1, 3)),
    st.tuples(st.just("member"), st.sampled_from(USERS), st.just(1)),
    st.tuples(st.just("bazaar"), st.just(0), st.integers(1, 3)),
    st.tuples(st.just("token"), st.sampled_from(USERS), st.just(0)),
    st.tuples(st.just("deletion"), st.just(0), st.integers(1, NOTES)),
    st.tuples(st.just("edit"), st.just(0), st.integers(1, NOTES)))
READS = st.tuples(st.just("read"), st.sampled_from((*USERS, 0)), st.integers(1, NOTES),
                  st.sampled_from((0, 60, 700, 2000, 20_000)))
TABLES = {"subscription": "subscription", "bazaar": "bazaar_notebook", "member": "circle_user",
          "token": "user_token"}


def _edited(content: str | None) -> str:
    """The content with a word added where every view that shows any of it shows it: first."""
    body = content or ""
    head = H if body.startswith(H) else ""
    return f"{head}edited {body[len(head):]}"


@dataclass(frozen=True)
class Row:
    """One changed row as change capture reads it (service.cdc.RowImage)."""

    table: str
    kind: Literal["insert", "update", "delete"]
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class World:
    def __init__(self, seed: int, notes: int = NOTES) -> None:
        self.db: MemoryWiki = random_graph(seed, notes=notes)
        self.tokens: dict[int, TokenOwner | None] = {u: TokenOwner(u, None) for u in USERS}
        self.epoch = [0]
        self.state = MemoryState(clock_ms=lambda: NOW_MS)
        self.service = ContextService(self.db, CharsCounter(), StrategyParams())
        self.cache = MemoryCache(self.state)
        assert rebuild(self.service, self.cache, self.db.live_ids_after(0, 10_000),
                       strategies=(STRATEGY,), seeds=(), max_token_limit=3000,
                       now_ms=NOW_MS).errors == {}
        config = ReaderConfig(strategies=(STRATEGY,), seeds=(), max_token_limit=3000)
        self.reader = SnapshotReader(self.service, self.cache, MemoryCoordination(self.state),
                                     config, clock_ms=lambda: NOW_MS + 1_000,
                                     epoch=lambda: self.epoch[0], verdict_ttl_ms=None)
        book = TokenBook(lambda t: self.tokens.get(int(t.removeprefix("tok-"))), ttl_ms=None,
                         clock_ms=lambda: 0, wall_ms=lambda: NOW_MS, epoch=lambda: self.epoch[0])
        self.viewers = Viewers(book)

    def change(self, kind: str, user: int, other: int) -> None:
        if kind in ("deletion", "edit"):
            return self.edit(other, deletion=kind == "deletion")
        toggled: set[Any] = {"subscription": self.db.subscriptions, "bazaar": self.db.bazaar,
                             "member": self.db.circles.setdefault(1, set())}.get(kind, set())
        item = {"subscription": (user, other), "bazaar": other, "member": user}.get(kind)
        row = {"subscription": {"user_id": user, "notebook_id": other},
               "bazaar": {"notebook_id": other}, "member": {"circle_id": 1, "user_id": user},
               "token": {"user_id": user, "token": f"tok-{user}"}}[kind]
        gone = self.tokens.get(user) is not None if kind == "token" else item in toggled
        if kind == "token":
            self.tokens[user] = None if gone else TokenOwner(user, None)
        elif gone:
            toggled.discard(item)
        else:
            toggled.add(item)
        self.tell([Row(TABLES[kind], "delete", row, None) if gone
                   else Row(TABLES[kind], "insert", None, row)])

    def edit(self, note_id: int, *, deletion: bool) -> None:
        """Delete or restore a note, or add a word to its content; tell it as a ``note`` row."""
        note = self.db.notes.get(note_id)
        if note is None:
            return
        self.db.notes[note_id] = (dataclasses.replace(note, deleted=not note.deleted) if deletion
                                  else dataclasses.replace(note, content=_edited(note.content)))
        image = {"id": note_id, "folder_id": note.folder_id, "notebook_id": note.notebook_id}
        stamps = [None, "2026-12-01 00:00:00"]
        was, now = stamps if not note.deleted else stamps[::-1]
        if not deletion:
            was = now = stamps[note.deleted]
        self.tell([Row("note", "update", image | {"deleted_at": was}, image | {"deleted_at": now})])

    def tell(self, changes: list[Row]) -> None:
        """What change capture and the worker do with a transaction's rows."""
        events = events_of(changes, model="wiki", occurred_at="2026-12-01T00:00:00Z")
        record_events([NoteEvent.from_json(e) for e in events], self.db, self.cache,
                      MemoryDirtySet(self.state), sibling_radius=0, now_ms=NOW_MS)
        if touches_access(changes, model="wiki"):
            self.epoch[0] += MOVES

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


@settings(max_examples=sized(ci=100, full=1_000), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), steps=st.lists(st.one_of(CHANGES, READS, READS), max_size=40))
def test_every_answer_is_the_live_rules_once_capture_told_it(seed: int, steps: list[Any]) -> None:
    world = World(seed)
    for step in steps:
        if step[0] == "read":
            _, user, note, limit = step
            assert world.served(user, note, limit) == world.rule(user, note, limit), step
        else:
            world.change(*step)


def test_the_owners_own_access_change_outdates_their_snapshot() -> None:
    world = World(5, notes=30)  # user 1 owns note 1's notebook; a link target's notebook is the circle's
    before = world.served(1, 1, 0)
    world.change("member", 1, 1)
    assert world.served(1, 1, 0) == world.rule(1, 1, 0) != before


def test_a_revoked_token_reads_as_nobody_once_the_epoch_moved() -> None:
    world = World(5, notes=30)
    assert world.served(1, 1, 2000) == world.rule(1, 1, 2000) != "not-logged-in"
    world.change("token", 1, 0)
    assert world.served(1, 1, 2000) == world.rule(1, 1, 2000) == "not-logged-in"
