"""A batch-wide, read-through view of the note graph that never does I/O itself.

Algorithms read the graph through :class:`GraphView`. When a datum has not been loaded, the view
raises :class:`MissingData` naming it (or an algorithm yields a :class:`~graphrag.tree.model.Need`
first via :meth:`GraphView.ensure`); the batch driver gathers the needs of every focus note in the
batch, loads them in one set of IN queries, and resumes. A deleted or dangling note reads as absent
everywhere.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable

from graphrag.tree.model import Need, Row, Skeleton

__all__ = ["MAX_ANCESTORS", "GraphView", "MissingData"]

MAX_ANCESTORS = 1000  # a parent chain longer than this is treated as ending there (cycle guard)


class MissingData(Exception):
    """Control flow, not an error: the computation needs ``need`` loaded before it can go on."""

    def __init__(self, need: Need) -> None:
        super().__init__(f"missing {need.size()} ids")
        self.need = need


class GraphView:
    """Everything loaded so far for one batch. Loading methods are ``put_*``; reads never load."""

    def __init__(self) -> None:
        self._skeletons: dict[int, Skeleton | None] = {}
        self._children: dict[int, tuple[int, ...]] = {}
        self._inbound: dict[int, tuple[int, ...]] = {}
        self._rows: dict[int, Row | None] = {}

    # -- loading (called by the storage layer) ----------------------------------------------------
    def put_skeletons(self, skeletons: Iterable[Skeleton]) -> None:
        for sk in skeletons:
            self._skeletons[sk.id] = sk

    def put_absent(self, ids: Iterable[int]) -> None:
        """Mark ids that were asked for and not found, so they read as absent, not missing."""
        for note_id in ids:
            self._skeletons.setdefault(note_id, None)

    def put_children(self, parent_id: int, children: Iterable[Skeleton]) -> None:
        kids = sorted(children, key=lambda sk: sk.order_key)
        self.put_skeletons(kids)
        self._children[parent_id] = tuple(sk.id for sk in kids if not sk.deleted)

    def put_inbound(self, target_id: int, referrers: Iterable[Skeleton]) -> None:
        refs = sorted(referrers, key=lambda sk: sk.id)
        self.put_skeletons(refs)
        self._inbound[target_id] = tuple(sk.id for sk in refs if not sk.deleted)

    def put_child_ids(self, parent_id: int, ordered_ids: Iterable[int]) -> None:
        """Live children of ``parent_id`` already in sibling order (ids only: monster parents
        cost integers; skeletons of the few that get picked come with their rows)."""
        self._children[parent_id] = tuple(ordered_ids)

    def put_referrer_ids(self, target_id: int, ordered_ids: Iterable[int]) -> None:
        """Live link notes targeting ``target_id``, by ascending id (ids only)."""
        self._inbound[target_id] = tuple(ordered_ids)

    def put_row(self, skeleton: Skeleton, row: Row) -> None:
        self._skeletons[skeleton.id] = skeleton
        self._rows[skeleton.id] = row

    def put_absent_rows(self, ids: Iterable[int]) -> None:
        for note_id in ids:
            self._rows.setdefault(note_id, None)
            self._skeletons.setdefault(note_id, None)

    # -- reading ----------------------------------------------------------------------------------
    def note(self, note_id: int) -> Skeleton | None:
        """The skeleton, deleted or not; None when the id does not exist."""
        try:
            return self._skeletons[note_id]
        except KeyError:
            raise MissingData(Need(notes=frozenset({note_id}))) from None

    def live(self, note_id: int | None) -> Skeleton | None:
        """The skeleton of a live note; None for no id, an unknown id or a deleted note."""
        if note_id is None:
            return None
        sk = self.note(note_id)
        return None if sk is None or sk.deleted else sk

    def parent(self, note_id: int) -> Skeleton | None:
        sk = self.live(note_id)
        return None if sk is None else self.live(sk.parent_id)

    def target(self, note_id: int) -> Skeleton | None:
        sk = self.live(note_id)
        return None if sk is None else self.live(sk.target_id)

    def children(self, parent_id: int) -> tuple[int, ...]:
        """Live children in Doughnut's sibling order (sibling_order, id)."""
        try:
            return self._children[parent_id]
        except KeyError:
            raise MissingData(Need(children=frozenset({parent_id}))) from None

    def inbound(self, target_id: int) -> tuple[int, ...]:
        """Live link notes whose target is ``target_id``, by ascending id."""
        try:
            return self._inbound[target_id]
        except KeyError:
            raise MissingData(Need(inbound=frozenset({target_id}))) from None

    def row(self, note_id: int) -> Row | None:
        try:
            return self._rows[note_id]
        except KeyError:
            raise MissingData(Need(rows=frozenset({note_id}))) from None

    def ancestors(self, note_id: int) -> list[int]:
        """Live ancestors of a note, root first, parent last; stops at a deleted note or a cycle."""
        chain: list[int] = []
        seen = {note_id}
        current = self.live(note_id)
        while current is not None and len(chain) < MAX_ANCESTORS:
            parent_id = current.parent_id
            if parent_id is None or parent_id in seen:
                break
            if parent_id not in self._skeletons:
                raise MissingData(Need(ancestors=frozenset({parent_id})))
            current = self.live(parent_id)
            if current is not None:
                chain.append(parent_id)
                seen.add(parent_id)
        chain.reverse()
        return chain

    # -- needs ------------------------------------------------------------------------------------
    def missing(self, need: Need) -> Need:
        """The part of ``need`` not loaded yet (ancestor chains are followed as far as loaded)."""
        return Need(
            notes=frozenset(i for i in need.notes if i not in self._skeletons),
            children=frozenset(i for i in need.children if i not in self._children),
            inbound=frozenset(i for i in need.inbound if i not in self._inbound),
            ancestors=frozenset(self._chain_gaps(need.ancestors)),
            rows=frozenset(i for i in need.rows if i not in self._rows),
        )

    def _loaded(self, need: Need) -> bool:
        """Whether nothing of ``need`` is missing, by set inclusion on the loaded keys (ancestor
        chains are walked by :meth:`missing`)."""
        return (not need.ancestors and self._rows.keys() >= need.rows
                and self._skeletons.keys() >= need.notes and self._children.keys() >= need.children
                and self._inbound.keys() >= need.inbound)

    def _chain_gaps(self, starts: Iterable[int]) -> set[int]:
        gaps: set[int] = set()
        for start in starts:
            try:
                if start not in self._skeletons:
                    gaps.add(start)
                else:
                    self.ancestors(start)
            except MissingData as miss:
                gaps |= miss.need.ancestors
        return gaps

    def require(self, need: Need) -> None:
        """Raise :class:`MissingData` with everything of ``need`` that is not loaded."""
        missing = self.missing(need)
        if missing:
            raise MissingData(missing)

    def ensure(self, need: Need) -> Generator[Need, None, None]:
        """Yield what is missing of ``need`` until the driver has loaded all of it."""
        if self._loaded(need):  # the common case in a batch: no frozensets built
            return
        for _ in range(64):  # each round loads something; the bound only guards a broken loader
            missing = self.missing(need)
            if not missing:
                return
            yield missing
        raise RuntimeError(f"loader did not provide {self.missing(need).size()} ids")
