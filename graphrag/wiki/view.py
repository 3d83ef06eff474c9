"""A batch-wide, read-through view of the wiki graph that never does I/O itself.

Algorithms read through :class:`WikiView`. A read of something not loaded raises
:class:`~graphrag.wiki.model.MissingWiki` naming it; algorithms normally ask first with
:meth:`WikiView.ensure` (a generator yielding what is missing), and the batch driver loads the merged
needs of every computation of the batch in one round of queries.

Sampled lists (referrers, peers) are kept as the longest prefix loaded so far plus whether that prefix
is the whole list: a later ask for ``n`` items is answered by any loaded prefix of at least ``n`` items
or by a complete list. Because the lists are in a fixed order (:func:`~graphrag.wiki.model.sample_key`),
the first ``cap`` items that survive an exclusion set ``X`` are found in the first ``cap + |X|`` items,
which is what Doughnut's "exclude in SQL, then LIMIT cap" returns.

:attr:`WikiView.derived` keeps what computations derive from loaded data alone (a note's rendered
fields, its URI, a parent's readable targets for a viewer), so a note shown by many foci of one
workspace is rendered once. A load may deliver again what was already loaded (a whole folder
chain, a row held as absent that a sample names as live), normally as it was; should one ever
differ from the loaded note, folder, notebook, link list or access, every derived entry is dropped.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from graphrag.wiki.model import (
    Access,
    Folder,
    MissingWiki,
    Notebook,
    PeerKey,
    ReferrerKey,
    Viewer,
    WikiNeed,
    WikiNote,
)

__all__ = ["MAX_FOLDER_DEPTH", "WikiView"]

K = TypeVar("K")

MAX_FOLDER_DEPTH = 1000  # a folder chain longer than this is treated as ending there (cycle guard)


@dataclass(frozen=True, slots=True)
class _Prefix:
    ids: tuple[int, ...]
    complete: bool

    def covers(self, n: int) -> bool:
        return self.complete or len(self.ids) >= n


class WikiView:
    """Everything loaded so far for one batch. Loading methods are ``put_*``; reads never load."""

    def __init__(self) -> None:
        self._notes: dict[int, WikiNote | None] = {}
        self._folders: dict[int, Folder | None] = {}
        self._notebooks: dict[int, Notebook | None] = {}
        self._links: dict[int, tuple[int, ...]] = {}
        self._referrers: dict[ReferrerKey, _Prefix] = {}
        self._peers: dict[PeerKey, _Prefix] = {}
        self._access: dict[tuple[Viewer, int], Access] = {}
        #: values derived from loaded data only, with the facts read to derive them (module docstring)
        self.derived: dict[Hashable, tuple[Any, frozenset[str]]] = {}

    # -- loading (called by the storage layer) ----------------------------------------------------
    def put_notes(self, notes: Iterable[WikiNote]) -> None:
        for note in notes:
            self._replacing(self._notes, note.id, note)
            self._notes[note.id] = note

    def put_absent_notes(self, ids: Iterable[int]) -> None:
        """Mark ids that were asked for and not found, so they read as absent, not missing."""
        for note_id in ids:
            self._notes.setdefault(note_id, None)

    def put_folders(self, folders: Iterable[Folder]) -> None:
        for folder in folders:
            self._replacing(self._folders, folder.id, folder)
            self._folders[folder.id] = folder

    def put_absent_folders(self, ids: Iterable[int]) -> None:
        for folder_id in ids:
            self._folders.setdefault(folder_id, None)

    def put_notebooks(self, notebooks: Iterable[Notebook]) -> None:
        for notebook in notebooks:
            self._replacing(self._notebooks, notebook.id, notebook)
            self._notebooks[notebook.id] = notebook

    def put_absent_notebooks(self, ids: Iterable[int]) -> None:
        for notebook_id in ids:
            self._notebooks.setdefault(notebook_id, None)

    def put_links(self, note_id: int, target_ids: Iterable[int]) -> None:
        """The targets of ``note_id``'s cache rows in row-id order, raw (duplicates and deleted kept)."""
        targets = tuple(target_ids)
        self._replacing(self._links, note_id, targets)
        self._links[note_id] = targets

    def put_referrers(self, key: ReferrerKey, ordered_ids: Iterable[int], complete: bool) -> None:
        """A prefix of the referrer list of ``key``; ``complete`` when the query returned fewer rows
        than it asked for. A shorter prefix never replaces a longer one."""
        self._referrers[key] = _longer(self._referrers.get(key), _Prefix(tuple(ordered_ids), complete))

    def put_peers(self, key: PeerKey, ordered_ids: Iterable[int], complete: bool) -> None:
        """A prefix of the member list of ``key`` (see :meth:`put_referrers`)."""
        self._peers[key] = _longer(self._peers.get(key), _Prefix(tuple(ordered_ids), complete))

    def put_access(self, viewer: Viewer, notebook_id: int, access: Access) -> None:
        self._replacing(self._access, (viewer, notebook_id), access)
        self._access[(viewer, notebook_id)] = access

    def _replacing(self, loaded: dict[Any, Any], key: Hashable, value: object) -> None:
        """Drop every derived value when a load changes what was loaded under ``key`` (the
        loaders may deliver a row again, a folder with each chain that names it: as it was, it
        changes nothing)."""
        if self.derived and key in loaded and loaded[key] != value:
            self.derived.clear()

    # -- reading ----------------------------------------------------------------------------------
    def note(self, note_id: int) -> WikiNote | None:
        """The row, deleted or not; None when the id does not exist."""
        try:
            return self._notes[note_id]
        except KeyError:
            raise MissingWiki(WikiNeed.of(notes={note_id})) from None

    def has_note(self, note_id: int) -> bool:
        return note_id in self._notes

    def folder(self, folder_id: int) -> Folder | None:
        try:
            return self._folders[folder_id]
        except KeyError:
            raise MissingWiki(WikiNeed.of(folders={folder_id})) from None

    def folder_chain(self, folder_id: int | None) -> list[Folder]:
        """The folder and its ancestors, outermost first; empty for None. Stops at an absent parent
        or a cycle (Doughnut would loop forever on a cycle; the schema's keys make both impossible)."""
        chain: list[Folder] = []
        seen: set[int] = set()
        current = folder_id
        while current is not None and current not in seen and len(chain) < MAX_FOLDER_DEPTH:
            folder = self.folder(current)
            if folder is None:
                break
            chain.append(folder)
            seen.add(current)
            current = folder.parent_folder_id
        chain.reverse()
        return chain

    def notebook(self, notebook_id: int) -> Notebook | None:
        try:
            return self._notebooks[notebook_id]
        except KeyError:
            raise MissingWiki(WikiNeed.of(notebooks={notebook_id})) from None

    def has_notebook(self, notebook_id: int) -> bool:
        return notebook_id in self._notebooks

    def links(self, note_id: int) -> tuple[int, ...]:
        try:
            return self._links[note_id]
        except KeyError:
            raise MissingWiki(WikiNeed.of(links={note_id})) from None

    def has_links(self, note_id: int) -> bool:
        return note_id in self._links

    def referrers(self, key: ReferrerKey, n: int) -> tuple[int, ...]:
        """At least the first ``n`` referrers (all of them when there are fewer)."""
        prefix = self._referrers.get(key)
        if prefix is None or not prefix.covers(n):
            raise MissingWiki(WikiNeed.of(referrers={key: n}))
        return prefix.ids

    def peers(self, key: PeerKey, n: int) -> tuple[int, ...]:
        """At least the first ``n`` members (all of them when there are fewer)."""
        prefix = self._peers.get(key)
        if prefix is None or not prefix.covers(n):
            raise MissingWiki(WikiNeed.of(peers={key: n}))
        return prefix.ids

    def is_complete_peers(self, key: PeerKey) -> bool:
        prefix = self._peers.get(key)
        return prefix is not None and prefix.complete

    def is_complete_referrers(self, key: ReferrerKey) -> bool:
        prefix = self._referrers.get(key)
        return prefix is not None and prefix.complete

    def access(self, viewer: Viewer, notebook_id: int) -> Access:
        try:
            return self._access[(viewer, notebook_id)]
        except KeyError:
            raise MissingWiki(WikiNeed.of(access={(viewer, notebook_id)})) from None

    # -- needs ------------------------------------------------------------------------------------
    def unread_notes(self, ids: Iterable[int], *, live: Iterable[int]) -> set[int]:
        """The notes of ``ids`` whose rows a load reads: those not loaded yet, and those of
        ``live`` (just sampled as live notes) held as absent from an earlier read."""
        unread = {i for i in ids if i not in self._notes}
        return unread | {i for i in live if i in self._notes and self._notes[i] is None}

    def missing(self, need: WikiNeed) -> WikiNeed:
        """The part of ``need`` not loaded yet (folder chains are followed as far as loaded)."""
        return WikiNeed.of(
            notes=(i for i in need.notes if i not in self._notes),
            folders=self._chain_gaps(need.folders),
            notebooks=(i for i in need.notebooks if i not in self._notebooks),
            links=(i for i in need.links if i not in self._links),
            referrers=_uncovered(self._referrers, need.referrer_lengths()),
            peers=_uncovered(self._peers, need.peer_lengths()),
            access=(pair for pair in need.access if pair not in self._access),
        )

    def _chain_gaps(self, starts: Iterable[int]) -> set[int]:
        gaps: set[int] = set()
        for start in starts:
            try:
                self.folder_chain(start)
            except MissingWiki as miss:
                gaps |= miss.need.folders
        return gaps

    def ensure(self, need: WikiNeed) -> Generator[WikiNeed, None, None]:
        """Yield what is missing of ``need`` until the driver has loaded all of it."""
        for _ in range(64):  # each round loads something; the bound only guards a broken loader
            missing = self.missing(need)
            if not missing:
                return
            yield missing
        raise RuntimeError(f"loader did not provide {self.missing(need).size()} ids")


def _longer(old: _Prefix | None, new: _Prefix) -> _Prefix:
    if old is None or new.complete or len(new.ids) > len(old.ids):
        return new
    return old


def _uncovered(loaded: dict[K, _Prefix], asked: dict[K, int]) -> dict[K, int]:
    return {key: n for key, n in asked.items() if key not in loaded or not loaded[key].covers(n)}
