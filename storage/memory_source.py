"""An in-memory note source of the tree model: the fast twin of the ``doughnut-2025`` profile.

It answers every need exactly as the SQL profile does (live children in (sibling_order, id) order,
live referrers by id, ancestor chains, rows whose parent/target refs are only live notes, absent ids
recorded as absent), and passes the same NoteSource contract suite (tests/contracts). Use cases run
against it in milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from graphrag import GraphView, Need, Ref, Row, Skeleton
from graphrag.core.errors import DatabaseUnavailable
from service.binding import OLDEST_NOTES, DatabaseIdentity
from service.ports import Cursor, Loader, Piece
from storage.database import epoch_ms
from storage.pieces import by_notebook
from storage.records import TreeNote

__all__ = ["MemoryTree"]


class MemoryTree:
    """A :class:`service.ports.NoteSource` over :class:`TreeNote` records held in memory."""

    profile = "memory-tree"
    model = "tree"

    def __init__(self, notes: Iterable[TreeNote] = ()) -> None:
        self.notes: dict[int, TreeNote] = {n.id: n for n in notes}
        self.down = False
        self.loads: list[Need] = []

    def put(self, note: TreeNote) -> None:
        """Insert or replace a note (tests edit the "database" this way)."""
        self.notes[note.id] = note

    def _check(self) -> None:
        if self.down:
            raise DatabaseUnavailable("database unreachable: the in-memory source is switched off")

    def check(self) -> None:
        self._check()

    def ping(self) -> None:
        self._check()

    @contextmanager
    def batch(self) -> Iterator[Loader]:
        self._check()
        yield self._load

    # -- needs ----------------------------------------------------------------------------------
    def _load(self, view: GraphView, need: Need) -> None:
        self._check()
        self.loads.append(need)
        for i in need.rows:
            self._put_row(view, i)
        for i in view.missing(Need(notes=need.notes)).notes | need.ancestors:
            self._put_chain(view, i)
        live = [n for n in self.notes.values() if n.deleted_at is None]
        for p in need.children:
            kids = sorted((n for n in live if n.parent_id == p), key=lambda n: (n.sibling_order, n.id))
            view.put_child_ids(p, [n.id for n in kids])
        for t in need.inbound:
            view.put_referrer_ids(t, sorted(n.id for n in live if n.target_note_id == t))

    @staticmethod
    def _skeleton(n: TreeNote) -> Skeleton:
        return Skeleton(n.id, n.parent_id, n.target_note_id, n.sibling_order, n.deleted_at is not None)

    def _ref(self, note_id: int | None) -> Ref | None:
        n = self.notes.get(note_id) if note_id is not None else None
        return None if n is None or n.deleted_at is not None else Ref(n.id, n.title)

    def _put_row(self, view: GraphView, note_id: int) -> None:
        n = self.notes.get(note_id)
        if n is None:
            view.put_absent_rows([note_id])
            return
        row = Row(n.id, n.title, n.details, epoch_ms(n.created_at), n.target_note_id is not None,
                  self._ref(n.parent_id), self._ref(n.target_note_id))
        view.put_row(self._skeleton(n), row)

    def _put_chain(self, view: GraphView, start: int) -> None:
        seen: set[int] = set()
        current: int | None = start
        while current is not None and current not in seen:
            seen.add(current)
            n = self.notes.get(current)
            if n is None:
                view.put_absent([current])
                return
            view.put_skeletons([self._skeleton(n)])
            current = n.parent_id

    # -- edits and paging -----------------------------------------------------------------------
    def edit_scope(self, roots: Iterable[int], *, limit: int = 10_000) -> set[int]:
        self._check()
        found = set(roots)
        frontier = set(found)
        while frontier and len(found) < limit:
            frontier = {n.id for n in self.notes.values() if n.parent_id in frontier} - found
            found |= frontier
        for _ in range(2):  # the links into the subtree, then the links to those (doughnut_2025)
            found |= {n.id for n in self.notes.values() if n.target_note_id in found}
        return found

    def access_reach(self, notebooks: Iterable[int], circles: Iterable[int],
                     ownerships: Iterable[int]) -> tuple[set[int], set[int]]:
        """The tree has no notebooks' access."""
        return set(), set()

    def referrers_of(self, ids: Iterable[int]) -> dict[int, set[int]]:
        self._check()
        return {i: {n.id for n in self.notes.values() if n.target_note_id == i} for i in ids}

    def live_ids_after(self, after_id: int, limit: int) -> list[int]:
        self._check()
        return sorted(i for i, n in self.notes.items() if i > after_id and n.deleted_at is None)[:limit]

    def workspaces(self, max_notes: int, *, after: Cursor = None) -> Iterator[Piece]:
        self._check()
        live = [(n.id, n.notebook_id) for n in self.notes.values() if n.deleted_at is None]
        return by_notebook(live, max_notes, after)

    def count_live(self) -> int:
        self._check()
        return sum(n.deleted_at is None for n in self.notes.values())

    def any_note(self) -> bool:
        self._check()
        return bool(self.notes)

    def identity(self) -> DatabaseIdentity:
        oldest = sorted(self.notes.values(), key=lambda n: n.id)[:OLDEST_NOTES]
        return DatabaseIdentity.of(self.profile, "memory",
                                   [(n.id, str(n.created_at)[:19]) for n in oldest])
