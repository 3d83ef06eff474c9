"""One focus's reads of the wiki graph: Doughnut's queries as needs and as reads of a view.

:class:`Walk` knows the focus, the viewer and the seed. For each kind of read it offers a ``*_need``
method that names everything it can from what is already loaded (never raising, so a stage can ask
for all of it in one round) and a read method that applies Doughnut's filtering in Python on the
loaded, ordered lists. Every read records the facts it depends on in :attr:`Walk.facts`.

Lengths asked of sampled lists: a parent's referrers are asked for ``cap + |{focus} ∪ its link
targets|`` items (the exclusions are the focus and the parent's outgoing targets, a subset), the
focus's for at least ``20 + 1``; a peer group for the largest cap of its anchors plus the number of
live members that some budget may claim (so any claimed subset still leaves ``cap`` candidates).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TypeVar

from graphrag.wiki.approx_tokens import cut_and_measure, tokens_of, utf16_length
from graphrag.wiki.focus.trace import NoteFields, group_key
from graphrag.wiki.focus.types import FocusContextParams, FocusRequest
from graphrag.wiki.model import (
    MissingWiki,
    PeerKey,
    ReferrerKey,
    Viewer,
    WikiNeed,
    WikiNote,
    display_name,
)
from graphrag.wiki.view import WikiView

__all__ = ["Walk", "forget_related_bodies", "related_body"]

#: how many (content, cap) cuts :func:`related_body` remembers (a rebuild pass sees a note in tens of
#: traces, mostly of its neighbours), and of texts up to how many characters: an entry keeps its text
#: and its cut alive, so at most 4,096 x 2 x 8,192 characters (a few MB for typical notes)
RELATED_BODIES = 4_096
REMEMBERED_CHARS = 8_192


def related_body(content: str | None, cap: int) -> tuple[str | None, bool, int]:
    """A related note's body cut to ``cap`` tokens, whether that shortened it, and its cost
    ``max(1, estimate(cut body))``: a function of the text alone, so remembered by it (never
    stale, whatever was edited since; the cut and the estimates walk the text char by char)."""
    if content is not None and len(content) > REMEMBERED_CHARS:
        return _related_body(content, cap)
    return _remembered(content, cap)


def forget_related_bodies() -> None:
    """Forget every remembered cut (a benchmark's fair start)."""
    _remembered.cache_clear()


def _related_body(content: str | None, cap: int) -> tuple[str | None, bool, int]:
    if not content:
        return content, False, 1
    body, size = cut_and_measure(content, cap)  # (the text itself when it fits)
    shortened = body is not content and utf16_length(body) < utf16_length(content)
    return body, shortened, max(1, tokens_of(size))


_remembered = lru_cache(maxsize=RELATED_BODIES)(_related_body)

Path = tuple[int, ...]
T = TypeVar("T")


class Walk:
    """Reads of one focus-context computation (see the module docstring)."""

    def __init__(
        self,
        view: WikiView,
        params: FocusContextParams,
        request: FocusRequest,
        focus: WikiNote,
        viewer: Viewer,
    ) -> None:
        self.view, self.params, self.focus, self.viewer = view, params, focus, viewer
        self.seed = request.seed
        self.max_depth = request.depth(params)
        self.limit = request.sizing_limit
        self.facts: set[str] = {f"note:{focus.id}", f"notebook:{focus.notebook_id}"}
        self.seen: set[int] = {focus.id}  # notes named by a need so far: their render data is prefetched
        self._costs: dict[int, int] = {}
        # the render data of the loaded seen notes, gathered once per note (``with_render``)
        self._rendered: set[int] = set()
        self._notebooks: set[int] = set()
        self._folders: set[int] = set()

    # -- keys and rows ----------------------------------------------------------------------------
    def referrer_key(self, note_id: int) -> ReferrerKey:
        return (note_id, self.seed, self.viewer)

    def peer_key(self, note: WikiNote) -> PeerKey | None:
        """The note's peer query: its folder, else its notebook root, else none."""
        if note.folder_id is not None:
            return (note.notebook_id, note.folder_id, self.seed)
        if note.notebook_id is not None:
            return (note.notebook_id, None, self.seed)
        return None

    def group_of(self, note: WikiNote) -> str | None:
        key = self.peer_key(note)
        return None if key is None else group_key(key[0], key[1])

    def row(self, note_id: int) -> WikiNote:
        note = self.view.note(note_id)
        if note is None:
            raise LookupError(f"note {note_id} was read as existing")
        return note

    def derived(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, remembered in the view (:attr:`WikiView.derived`: derived from loaded data
        alone, so the same for every focus of the workspace) with the facts it read, which are
        added to this walk's facts on every use."""
        hit = self.view.derived.get(key)
        if hit is None:
            outer, self.facts = self.facts, set()
            try:
                value = make()
            finally:
                read, self.facts = self.facts, outer
            hit = self.view.derived[key] = (value, frozenset(read))
        self.facts |= hit[1]
        return hit[0]

    def hydratable(self, note_id: int) -> bool:
        note = self.view.note(note_id)
        return note is not None and note.notebook_id is not None

    def cost(self, note_id: int) -> int:
        """``max(1, estimate(body cut to the related cap))``."""
        if note_id not in self._costs:
            self._costs[note_id] = related_body(self.row(note_id).content,
                                                self.params.related_content_cap)[2]
        return self._costs[note_id]

    # -- needs (never raise) ----------------------------------------------------------------------
    def expansion_need(self, parents: Sequence[int], depth: int, *, focus: bool = False) -> WikiNeed:
        """Links, their target rows and access, and the referrer lists of ``parents`` at ``depth``.
        (Gathered in plain sets and made a need once: a union per parent copied every set so far.)"""
        notes, access, referrers = set[int](), set[tuple[Viewer, int]](), dict[ReferrerKey, int]()
        for parent in parents:
            if not self.view.has_links(parent):
                continue
            targets = self.view.links(parent)
            notes.update(targets)
            access |= self._access_pairs(parent, targets)
            length = self._inbound_length(parent, depth, focus)
            if length > 0:
                key = self.referrer_key(parent)
                referrers[key] = max(length, referrers.get(key, 0))
                notes.update(self._loaded_referrers(key, length))
        self.seen |= notes
        need = WikiNeed.of(links=parents, notes=notes, access=access, referrers=referrers)
        return self.with_render(need)

    def peers_need(self, lengths: Mapping[PeerKey, int]) -> WikiNeed:
        members = {m for key, n in lengths.items() for m in self._loaded_peers(key, n)[:n]}
        self.seen |= members
        return self.with_render(WikiNeed.of(peers=lengths, notes=members))

    def with_render(self, need: WikiNeed) -> WikiNeed:
        """``need`` plus the notebooks and folders of every live note seen so far (prefetched in the
        same round, so rendering rarely needs a round of its own). A loaded note's are gathered
        once: ``seen`` only grows, and asked again on every round, it made this quadratic."""
        for note_id in self.seen - self._rendered:
            note = self._loaded_note(note_id)
            if note is not None:
                self._rendered.add(note_id)
                self._render_data(note, self._notebooks, self._folders)
        return need | WikiNeed.of(notebooks=self._notebooks, folders=self._folders)

    def render_need(self, note_ids: Iterable[int]) -> WikiNeed:
        """Notebooks and folder chains of the loaded ones of ``note_ids``."""
        notebooks: set[int] = set()
        folders: set[int] = set()
        for note_id in note_ids:
            note = self._loaded_note(note_id)
            if note is not None:
                self._render_data(note, notebooks, folders)
        return WikiNeed.of(notebooks=notebooks, folders=folders)

    @staticmethod
    def _render_data(note: WikiNote, notebooks: set[int], folders: set[int]) -> None:
        if not note.deleted:
            notebooks.update(() if note.notebook_id is None else (note.notebook_id,))
            folders.update(() if note.folder_id is None else (note.folder_id,))

    def _loaded_note(self, note_id: int) -> WikiNote | None:
        try:
            return self.view.note(note_id)
        except MissingWiki:
            return None

    def _loaded_referrers(self, key: ReferrerKey, length: int) -> tuple[int, ...]:
        try:
            return self.view.referrers(key, length)
        except MissingWiki:
            return ()

    def _loaded_peers(self, key: PeerKey, length: int) -> tuple[int, ...]:
        try:
            return self.view.peers(key, length)
        except MissingWiki:
            return ()

    def _access_pairs(self, parent: int, targets: Iterable[int]) -> set[tuple[Viewer, int]]:
        pairs: set[tuple[Viewer, int]] = set()
        for target in targets:
            note = self._loaded_note(target)
            notebook_id = self._target_notebook(parent, note)
            if notebook_id is not None:
                pairs.add((self.viewer, notebook_id))
        return pairs

    def _target_notebook(self, parent: int, target: WikiNote | None) -> int | None:
        """The notebook whose readability decides a live target: its own, else the parent's."""
        if target is None or target.deleted:
            return None
        if target.notebook_id is not None:
            return target.notebook_id
        return self.row(parent).notebook_id

    def _inbound_length(self, parent: int, depth: int, focus: bool) -> int:
        cap = self.params.sample_cap(depth)
        length = cap + len({self.focus.id, *self.view.links(parent)}) if cap > 0 else 0
        return max(length, self.params.focus_inbound_uri_cap + 1) if focus else length

    def peer_lengths(
        self, anchors: Iterable[tuple[int, int]], claimable: set[int]
    ) -> dict[PeerKey, int]:
        """How many members to load per group: the largest anchor cap plus the claimable members."""
        caps: dict[PeerKey, int] = {}
        for note_id, depth in anchors:
            cap, key = self.params.sample_cap(depth + 1), self.peer_key(self.row(note_id))
            if cap > 0 and key is not None:
                caps[key] = max(caps.get(key, 0), cap)
        excluded = [self.row(i) for i in claimable | {self.focus.id}]
        return {key: cap + sum(_member(n, key) for n in excluded) for key, cap in caps.items()}

    # -- reads ------------------------------------------------------------------------------------
    def outgoing(self, parent: int) -> list[int]:
        """Live, readable link targets of ``parent`` in row order, first row per target."""
        return list(self.derived(("outgoing", parent, self.viewer), lambda: self._outgoing(parent)))

    def _outgoing(self, parent: int) -> tuple[int, ...]:
        self.facts.add(f"links:{parent}")
        kept: list[int] = []
        for target in self.view.links(parent):
            self.facts.add(f"note:{target}")
            notebook_id = self._target_notebook(parent, self.view.note(target))
            if notebook_id is None or target in kept:
                continue
            self.facts.add(f"notebook:{notebook_id}")
            if self.view.access(self.viewer, notebook_id).readable:
                kept.append(target)
        return tuple(kept)

    def inbound(self, parent: int, depth: int) -> list[int]:
        """The referrers proposed from ``parent`` at ``depth``: focus and outgoing targets excluded."""
        cap = self.params.sample_cap(depth)
        if cap <= 0:
            return []
        excluded = {self.focus.id, *self.outgoing(parent)}
        return self._referrers(parent, cap, excluded, self._inbound_length(parent, depth, False))

    def focus_outgoing(self) -> list[int]:
        return self.outgoing(self.focus.id)

    def focus_inbound(self) -> list[int]:
        cap = self.params.focus_inbound_uri_cap
        return self._referrers(self.focus.id, cap, {self.focus.id}, cap + 1)

    def focus_siblings(self) -> list[int]:
        key, cap = self.peer_key(self.focus), self.params.sample_cap(1)
        if key is None or cap <= 0:
            return []
        length = cap + _member(self.focus, key)  # a deleted focus is no member (Doughnut's API)
        return [i for i in self.view.peers(key, length) if i != self.focus.id][:cap]

    def _referrers(self, parent: int, cap: int, excluded: set[int], length: int) -> list[int]:
        self.facts.add(f"inbound:{parent}")
        kept = [i for i in self.view.referrers(self.referrer_key(parent), length) if i not in excluded]
        self.facts.update(f"note:{i}" for i in kept[:cap])
        return kept[:cap]

    def proposals(
        self, frontier: Iterable[tuple[int, Path]], depth: int, dropped: set[int]
    ) -> list[tuple[int, Path]]:
        """Unique proposals of one depth, in order (first per note wins), minus ``dropped``."""
        unique: dict[int, Path] = {}
        for parent, path in frontier:
            targets = [t for t in self.outgoing(parent) if t != self.focus.id]
            for note_id in (*targets, *self.inbound(parent, depth)):
                unique.setdefault(note_id, (*path, note_id))
        return [(i, p) for i, p in unique.items() if i not in dropped]

    # -- rendering --------------------------------------------------------------------------------
    def uri(self, note_id: int) -> str:
        """``FocusContextWikiUri.of``: ``[[<notebook>: <title>]]``, or ``[[<title>]]`` without one."""
        return self.derived(("uri", note_id), lambda: self._uri(note_id))

    def _uri(self, note_id: int) -> str:
        note = self.row(note_id)
        self.facts.add(f"note:{note_id}")
        name = self.notebook_name(note.notebook_id)
        title = display_name(note.title)
        return f"[[{title}]]" if name is None else f"[[{name}: {title}]]"

    def fields(self, note_id: int) -> NoteFields:
        """A related note's fields as a trace keeps them (its body cut to the related cap)."""
        cap = self.params.related_content_cap
        return self.derived(("fields", note_id, cap), lambda: self._fields(note_id))

    def _fields(self, note_id: int) -> NoteFields:
        note = self.row(note_id)
        body, truncated, cost = related_body(note.content, self.params.related_content_cap)
        return NoteFields(self.notebook_name(note.notebook_id), display_name(note.title),
                          self.folder_path(note), note.created_at_ms, body, truncated, cost,
                          self.group_of(note))

    def notebook_name(self, notebook_id: int | None) -> str | None:
        if notebook_id is None:
            return None
        self.facts.add(f"notebook:{notebook_id}")
        notebook = self.view.notebook(notebook_id)
        return None if notebook is None else display_name(notebook.name)

    def folder_path(self, note: WikiNote) -> str:
        """Folder names from the notebook root to the note's folder, joined by ``" / "``."""
        chain = self.view.folder_chain(note.folder_id)
        self.facts.update(f"folder:{f.id}" for f in chain)
        return " / ".join(display_name(f.name) for f in chain)

    def note_facts(self, note_ids: Iterable[int]) -> None:
        self.facts.update(f"note:{i}" for i in note_ids)


def _member(note: WikiNote, key: PeerKey) -> bool:
    """Whether the peer query of ``key`` returns ``note``: live, and in that folder (any notebook:
    the folder query does not look at the notebook) or directly at that notebook's root."""
    if note.deleted:
        return False
    if key[1] is not None:
        return note.folder_id == key[1]
    return note.notebook_id == key[0] and note.folder_id is None
