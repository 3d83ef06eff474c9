"""Tracing: Doughnut's FocusContext traversal, done once for every budget up to a maximum.

The traversal of ``FocusContextRetrievalService`` (b2c0268c09) depends on the budget only through
where the greedy cuts fall; :func:`trace` records everything any budget from 1 to ``max_token_limit``
can use (see :mod:`graphrag.wiki.focus.trace`) and :func:`graphrag.wiki.focus.cut.cut` replays the cuts.

Why a ladder suffices: at each depth the wiki phase emits unique proposals while budget remains, so
depth d+1 runs only when every hydratable proposal of depth d was emitted, and then its frontier is
all of them. The emitted notes for any wiki budget are therefore a prefix of one list, built depth by
depth and stopped where the costs reach the largest wiki budget any allowed budget gives.

Data is read through a :class:`~graphrag.wiki.view.WikiView`; each stage yields the
:class:`~graphrag.wiki.model.WikiNeed` of everything it can name from what is loaded so far, so a
batch of foci shares its queries. Rules taken over from Doughnut's source:

* outgoing(P): P's cache rows in row order; a target that is absent or deleted, or whose notebook (P's
  notebook when the target has none) the viewer may not read, is dropped; first row per target wins;
* referrers(P): the live referrers visible from P (same notebook as P, or the viewer owns through
  ``ownership.user_id`` or subscribes), excluding the focus and P's outgoing targets, first ``cap``;
* proposals are never the focus; a proposal is hydratable when it has a notebook (the hydration query
  inner-joins the notebook; the foreign key makes "has a notebook id" equivalent); it does not filter
  ``deleted_at``, but no deleted note can be proposed;
* a note's cost is ``max(1, estimate(body cut to the related cap))``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from functools import partial

from graphrag.core.errors import NoteNotFound
from graphrag.wiki.approx_tokens import estimate_tokens, truncate_tokens, utf16_length
from graphrag.wiki.focus.cut import focus_uri
from graphrag.wiki.focus.ladder import BuiltLadder
from graphrag.wiki.focus.stored import FieldNotes
from graphrag.wiki.focus.trace import FocusFields, PeerList, Trace, WikiStep, group_key
from graphrag.wiki.focus.types import FocusContextParams, FocusRequest, NoteNotReadable
from graphrag.wiki.focus.walk import Walk
from graphrag.wiki.model import MissingWiki, PeerKey, Viewer, WikiNeed, WikiNote, display_name
from graphrag.wiki.view import WikiView

__all__ = ["budget_bounds", "trace"]


def trace(
    view: WikiView, params: FocusContextParams, request: FocusRequest
) -> Generator[WikiNeed, None, Trace]:
    """Trace one focus for every budget up to ``request.sizing_limit``; yields what it needs loaded."""
    focus_id = request.focus_id
    yield from _fixpoint(view, partial(_opening_need, view, params, request))
    focus = view.note(focus_id)
    if focus is None or (focus.deleted and not request.read_deleted):
        raise NoteNotFound(focus_id)
    viewer = _authorized_viewer(view, focus, request.viewer)
    walk = Walk(view, params, request, focus, viewer)
    builder = _Builder(walk, budget_bounds(focus.content, params, request.sizing_limit))
    yield from builder.run()
    return builder.build()


def _opening_need(view: WikiView, params: FocusContextParams, request: FocusRequest) -> WikiNeed:
    """The focus's own data and, once the viewer is known, the focus's expansion."""
    need = _focus_need(view, request.focus_id, request.viewer, request.read_deleted)
    focus = view.note(request.focus_id) if view.has_note(request.focus_id) else None
    if focus is None or (focus.deleted and not request.read_deleted) or focus.notebook_id is None:
        return need
    if request.viewer is None and not view.has_notebook(focus.notebook_id):
        return need
    viewer = request.viewer or _owner(view, focus.notebook_id)
    walk = Walk(view, params, request, focus, viewer)
    return need | walk.expansion_need([focus.id], 1, focus=True)


def _focus_need(view: WikiView, focus_id: int, viewer: Viewer | None,
                read_deleted: bool) -> WikiNeed:
    """The focus row and links, then its notebook, link targets and the viewer's access."""
    need = WikiNeed.of(notes={focus_id}, links={focus_id})
    focus = view.note(focus_id) if view.has_note(focus_id) else None
    if focus is None or (focus.deleted and not read_deleted) or focus.notebook_id is None:
        return need
    need |= WikiNeed.of(notebooks={focus.notebook_id}, folders=_some(focus.folder_id))
    if view.has_links(focus_id):
        need |= WikiNeed.of(notes=view.links(focus_id))
    if viewer is None and not view.has_notebook(focus.notebook_id):
        return need  # the owner is known once the notebook is loaded
    owner = viewer or _owner(view, focus.notebook_id)
    return need | WikiNeed.of(access={(owner, focus.notebook_id)})


def _some(value: int | None) -> set[int]:
    return set() if value is None else {value}


def _owner(view: WikiView, notebook_id: int) -> Viewer:
    notebook = view.notebook(notebook_id)
    if notebook is None:
        raise MissingWiki(WikiNeed())  # impossible under the foreign key; reads as "no access"
    return notebook.owner


def _authorized_viewer(view: WikiView, focus: WikiNote, asked: Viewer | None) -> Viewer:
    """The viewer (default: the focus notebook's owner), who must be able to read the focus."""
    if focus.notebook_id is None or view.notebook(focus.notebook_id) is None:
        raise NoteNotReadable(asked, focus.id)
    viewer = asked or _owner(view, focus.notebook_id)
    if not view.access(viewer, focus.notebook_id).readable:
        raise NoteNotReadable(viewer, focus.id)
    return viewer


def _fixpoint(view: WikiView, need_of: Callable[[], WikiNeed]) -> Generator[WikiNeed, None, None]:
    """Yield the missing part of ``need_of()`` (recomputed on what is loaded) until nothing is missing.

    ``need_of`` may stop at the first datum it cannot read: that datum is asked for too.
    """
    for _ in range(64):
        try:
            need = need_of()
        except MissingWiki as miss:
            need = miss.need
        missing = view.missing(need)
        if not missing:
            return
        yield missing
    raise RuntimeError("the loader did not provide what the focus-context trace asked for")


def budget_bounds(content: str | None, params: FocusContextParams, limit: int) -> tuple[int, bool]:
    """An upper bound of the wiki budget any combined budget 1..``limit`` gives, and whether any may
    give folder peers (a post-focus remainder of at least the peer gate).

    From ``fit = min(focus cap, estimate(body))`` on, the focus cost is a constant c and the remainder
    ``B - c`` grows with B; the wiki share drops at the gate, so on that stretch its largest value is at
    ``limit`` or at remainder ``gate - 1``. Below ``fit`` the body is cut to L = floor(3.75 B) bytes and
    keeps at least L - 3 of them (the next character, at most 4 bytes, did not fit), so its estimate
    is at least ``4(L - 3)/15 >= B - 1``: such budgets leave a remainder of at most 1.
    """
    if limit < 1:
        return 0, False
    fit = min(params.focus_content_cap, estimate_tokens(content))
    cost = estimate_tokens(truncate_tokens(content, fit))
    tail = {b for b in (limit, params.peer_gate - 1 + cost) if max(fit, 1) <= b <= limit}
    remainders = [max(0, b - cost) for b in tail] + ([1] if min(limit, fit - 1) >= 1 else [])
    shares = [params.wiki_budget(r) if r >= params.peer_gate else r for r in remainders]
    return max(shares, default=0), any(r >= params.peer_gate for r in remainders)


class _Builder:
    """Climbs the wiki ladder, samples peer groups, renders the trace."""

    def __init__(self, walk: Walk, bounds: tuple[int, bool]) -> None:
        self.walk = walk
        self.view = walk.view
        self.params = walk.params
        self.wiki_max, self.with_peers = bounds
        self.ladder: list[tuple[int, int, tuple[int, ...]]] = []
        self.complete = True
        self.groups: dict[PeerKey, int] = {}

    def run(self) -> Generator[WikiNeed, None, None]:
        walk = self.walk
        yield from _fixpoint(self.view, partial(walk.expansion_need, [walk.focus.id], 1, focus=True))
        if walk.max_depth >= 1 and self.wiki_max > 0:
            yield from self._climb()
        if self.with_peers:
            self.groups = walk.peer_lengths(self._anchors(), {s[0] for s in self.ladder})
            # one member more than any budget shows: whether a list is complete is then known from
            # the list itself, not from how long a prefix another computation loaded before
            asked = {key: length + 1 for key, length in self.groups.items()}
            yield from _fixpoint(self.view, partial(walk.peers_need, asked))
        yield from _fixpoint(self.view, lambda: walk.render_need(list(self._shown_ids())))

    def _climb(self) -> Generator[WikiNeed, None, None]:
        walk, spent = self.walk, 0
        frontier: list[tuple[int, tuple[int, ...]]] = [(walk.focus.id, (walk.focus.id,))]
        emitted: set[int] = set()
        for depth in range(1, walk.max_depth + 1):
            if not frontier or spent >= self.wiki_max:
                self.complete = not frontier
                return
            parents = [note_id for note_id, _ in frontier]
            yield from _fixpoint(self.view, partial(walk.expansion_need, parents, depth))
            proposals = walk.proposals(
                frontier, depth, emitted if self.params.dedupe_across_depths else set()
            )
            frontier = []
            for note_id, path in proposals:
                if spent >= self.wiki_max:
                    self.complete = False
                    return
                if walk.hydratable(note_id):
                    self.ladder.append((note_id, depth, path))
                    spent += walk.cost(note_id)
                    frontier.append((note_id, path))
                    emitted.add(note_id)

    def _anchors(self) -> list[tuple[int, int]]:
        return [(self.walk.focus.id, 0), *((note_id, depth) for note_id, depth, _ in self.ladder)]

    def _shown_ids(self) -> Iterable[int]:
        walk = self.walk
        yield walk.focus.id
        yield from walk.focus_outgoing()
        yield from walk.focus_inbound()
        for note_id, _, _ in self.ladder:
            yield note_id
        for key, length in self.groups.items():
            yield from self.view.peers(key, length)[:length]

    # -- rendering --------------------------------------------------------------------------------
    def build(self) -> Trace:
        walk = self.walk
        notes = {note_id: walk.fields(note_id) for note_id, _, _ in self.ladder}
        groups: dict[str, PeerList] = {}
        for key, length in self.groups.items():
            members = self.view.peers(key, length + 1)
            groups[group_key(key[0], key[1])] = PeerList(members[:length], len(members) <= length)
            walk.facts.add(f"peers:{group_key(key[0], key[1])}")
            walk.note_facts(members[:length])
            notes.update((i, walk.fields(i)) for i in members[:length] if walk.hydratable(i))
        return Trace(
            params=self.params,
            focus_id=walk.focus.id,
            seed=walk.seed,
            viewer=walk.viewer,
            max_depth=walk.max_depth,
            max_token_limit=walk.limit,
            focus=self._focus_fields(),
            outgoing_links=tuple(map(walk.uri, walk.focus_outgoing())),
            inbound_references=tuple(map(walk.uri, walk.focus_inbound())),
            sample_siblings=tuple(map(walk.uri, walk.focus_siblings())) if self.with_peers else None,
            wiki=BuiltLadder([WikiStep(i, d, self._path(p)) for i, d, p in self.ladder]),
            wiki_complete=self.complete,
            notes=FieldNotes(notes),
            groups=groups,
            facts=frozenset(walk.facts),
        )

    def _path(self, path: tuple[int, ...]) -> tuple[str, ...]:
        walk = self.walk
        return (focus_uri(display_name(walk.focus.title)), *map(walk.uri, path[1:]))

    def _focus_fields(self) -> FocusFields:
        walk, focus = self.walk, self.walk.focus
        cap = min(self.params.focus_content_cap, max(0, walk.limit))
        body = truncate_tokens(focus.content, cap)
        shortened = (
            body is not None
            and focus.content is not None
            and utf16_length(body) < utf16_length(focus.content)
        )
        return FocusFields(
            walk.notebook_name(focus.notebook_id),
            display_name(focus.title),
            walk.folder_path(focus),
            focus.created_at_ms,
            body,
            shortened,
            walk.group_of(focus),
        )
