"""The wiki graph of Doughnut 2026 (notes in folders and notebooks, links from the title cache) and
the data needs of the algorithms that read it.

Rows mirror the tables Doughnut's FocusContext reads (at commit b2c0268c09): ``note``, ``folder``,
``notebook`` with its owner, and the ``note_wiki_title_cache`` rows as ``links``. Names are the raw
column values; :func:`display_name` applies the trim Doughnut's ``DisplayName`` applies on every read
of a title, folder name or notebook name. The batch-wide view over these rows is
:class:`graphrag.wiki.view.WikiView`.

Whose view: :class:`Viewer` is a user, or a circle read as "a member of that circle with no notebooks
or subscriptions of their own" (the owner view of a circle-owned notebook), or nobody (Doughnut's
anonymous reader, who may read bazaar notebooks and sees referrers in the parent's notebook only).
:class:`Access` is what
one viewer may do with one notebook, in Doughnut's two different rules:

* ``readable`` (``AuthorizationService.userMayReadNotebook``): the viewer owns the notebook (its
  ownership names the user, or a circle the user belongs to), subscribes to it, or it is in the
  bazaar. Outgoing link targets and the focus itself need it.
* ``inbound_visible`` (the native inbound query of ``NoteWikiTitleCacheRepository``): the ownership
  names the user directly (``ownership.user_id``), or the user subscribes. Circle membership and the
  bazaar do not count here, although Java's ``User.canReferTo`` (used elsewhere for the same purpose)
  counts circles. Referrers in the parent's own notebook are visible whatever the access.

Sampling order (:func:`sample_key`): without a seed, ascending id; with seed ``S`` (any Java long),
ascending ``CRC32(CONCAT(CAST(id AS CHAR), S))`` as MySQL computes it, i.e. ``zlib.crc32`` of the
ASCII text ``f"{id}{S}"``. MySQL leaves equal CRCs in arbitrary order; ties are pinned by id here.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Access",
    "Folder",
    "MissingWiki",
    "Notebook",
    "PeerKey",
    "ReferrerKey",
    "Viewer",
    "WikiNeed",
    "WikiNote",
    "display_name",
    "sample_key",
]

# Java's (?U)\s (Unicode White_Space) plus the zero-width characters DisplayName also trims.
_TRIMMED = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\u200b\u200c\u200d\u2060\ufeff"
)


def display_name(raw: str) -> str:
    """A title, folder name or notebook name as Doughnut reads it: surrounding whitespace trimmed."""
    return raw.strip(_TRIMMED)


def sample_key(note_id: int, seed: int | None) -> tuple[int, int]:
    """Sort key of Doughnut's SQL sampling order: by id, or by CRC-32 of id and seed, ties by id."""
    if seed is None:
        return (0, note_id)
    return (zlib.crc32(f"{note_id}{seed}".encode("ascii")), note_id)


@dataclass(frozen=True, slots=True)
class Viewer:
    """Whose view a result is: a user id, a circle id, or neither (anonymous), never both."""

    user_id: int | None = None
    circle_id: int | None = None

    def __post_init__(self) -> None:
        if self.user_id is not None and self.circle_id is not None:
            raise ValueError("a viewer is a user or a circle, not both")

    @property
    def anonymous(self) -> bool:
        return self.user_id is None and self.circle_id is None

    def __str__(self) -> str:
        if self.user_id is not None:
            return f"user {self.user_id}"
        return "nobody" if self.circle_id is None else f"circle {self.circle_id}"

    def to_json(self) -> dict[str, int]:
        if self.user_id is not None:
            return {"userId": self.user_id}
        return {} if self.circle_id is None else {"circleId": self.circle_id}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Viewer:
        return Viewer(user_id=data.get("userId"), circle_id=data.get("circleId"))


@dataclass(frozen=True, slots=True)
class WikiNote:
    """One ``note`` row. ``deleted`` is true when ``deleted_at`` is set."""

    id: int
    notebook_id: int | None
    folder_id: int | None
    title: str
    content: str | None
    created_at_ms: int
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class Folder:
    """One ``folder`` row; ``parent_folder_id`` None is a top-level folder."""

    id: int
    notebook_id: int
    parent_folder_id: int | None
    name: str


@dataclass(frozen=True, slots=True)
class Notebook:
    """One ``notebook`` row with its owner (the ownership's user or circle)."""

    id: int
    name: str
    owner: Viewer


@dataclass(frozen=True, slots=True)
class Access:
    """What one viewer may do with one notebook (see the module docstring)."""

    readable: bool
    inbound_visible: bool


ReferrerKey = tuple[int, int | None, Viewer]
"""(target note id, seed, viewer): the live referrers of the target the viewer may see."""

PeerKey = tuple[int | None, int | None, int | None]
"""(notebook id, folder id or None for the notebook root, seed): the live direct members."""


def _pairs(mapping: Mapping[Any, int]) -> frozenset[tuple[Any, int]]:
    return frozenset(mapping.items())


def _merge(a: frozenset[tuple[Any, int]], b: frozenset[tuple[Any, int]]) -> frozenset[tuple[Any, int]]:
    """Union of two key -> length requests; a key asked twice keeps the longer length."""
    if not a or not b:
        return a or b
    merged: dict[Any, int] = {}
    for key, length in (*a, *b):
        merged[key] = max(length, merged.get(key, 0))
    return _pairs(merged)


def _no_pairs() -> frozenset[tuple[Any, int]]:
    return frozenset()


def _no_access() -> frozenset[tuple[Viewer, int]]:
    return frozenset()


def _no_ids() -> frozenset[int]:
    return frozenset()


@dataclass(frozen=True, slots=True)
class WikiNeed:
    """Data a wiki algorithm waits for, by kind.

    ``notes``: rows by id, deleted ones included; ids not found are recorded as absent.
    ``folders``: rows by id, each with its whole parent chain. ``notebooks``: rows by id.
    ``links``: per note, the targets of its cache rows in row-id order, raw (targets may be deleted).
    ``referrers``: (key, n) pairs, :data:`ReferrerKey` -> the first n live referrers the viewer may
    see, in sampling order. ``peers``: (key, n) pairs, :data:`PeerKey` -> the first n live direct
    members in sampling order. ``access``: (viewer, notebook id) pairs.
    """

    notes: frozenset[int] = field(default_factory=_no_ids)
    folders: frozenset[int] = field(default_factory=_no_ids)
    notebooks: frozenset[int] = field(default_factory=_no_ids)
    links: frozenset[int] = field(default_factory=_no_ids)
    referrers: frozenset[tuple[ReferrerKey, int]] = field(default_factory=_no_pairs)
    peers: frozenset[tuple[PeerKey, int]] = field(default_factory=_no_pairs)
    access: frozenset[tuple[Viewer, int]] = field(default_factory=_no_access)

    @staticmethod
    def of(
        *,
        notes: Iterable[int] = (),
        folders: Iterable[int] = (),
        notebooks: Iterable[int] = (),
        links: Iterable[int] = (),
        referrers: Mapping[ReferrerKey, int] | None = None,
        peers: Mapping[PeerKey, int] | None = None,
        access: Iterable[tuple[Viewer, int]] = (),
    ) -> WikiNeed:
        """A need from plain iterables and mappings."""
        return WikiNeed(
            notes=frozenset(notes),
            folders=frozenset(folders),
            notebooks=frozenset(notebooks),
            links=frozenset(links),
            referrers=_pairs(referrers or {}),
            peers=_pairs(peers or {}),
            access=frozenset(access),
        )

    def referrer_lengths(self) -> dict[ReferrerKey, int]:
        return dict(self.referrers)

    def peer_lengths(self) -> dict[PeerKey, int]:
        return dict(self.peers)

    @staticmethod
    def union(needs: Sequence[WikiNeed]) -> WikiNeed:
        """Every need of ``needs`` merged in one pass (what ``|`` does pairwise)."""
        ids: tuple[set[int], ...] = (set(), set(), set(), set())
        access: set[tuple[Viewer, int]] = set()
        lengths: tuple[dict[Any, int], dict[Any, int]] = ({}, {})
        for need in needs:
            for into, kind in zip(ids, (need.notes, need.folders, need.notebooks, need.links),
                                  strict=True):
                into |= kind
            access |= need.access
            for into_lengths, pairs in zip(lengths, (need.referrers, need.peers), strict=True):
                for key, length in pairs:
                    if key not in into_lengths or length > into_lengths[key]:
                        into_lengths[key] = length
        notes, folders, notebooks, links = map(frozenset, ids)
        return WikiNeed(notes, folders, notebooks, links, _pairs(lengths[0]), _pairs(lengths[1]),
                        frozenset(access))

    def __or__(self, other: WikiNeed) -> WikiNeed:
        return WikiNeed(
            notes=self.notes | other.notes,
            folders=self.folders | other.folders,
            notebooks=self.notebooks | other.notebooks,
            links=self.links | other.links,
            referrers=_merge(self.referrers, other.referrers),
            peers=_merge(self.peers, other.peers),
            access=self.access | other.access,
        )

    def __bool__(self) -> bool:
        return self.size() > 0

    def size(self) -> int:
        """How many ids and keys the need names, all kinds together."""
        kinds = (self.notes, self.folders, self.notebooks, self.links, self.referrers, self.peers,
                 self.access)
        return sum(map(len, kinds))


class MissingWiki(Exception):
    """Control flow, not an error: the computation needs ``need`` loaded before it can go on."""

    def __init__(self, need: WikiNeed) -> None:
        super().__init__(f"missing {need.size()} ids")
        self.need = need
