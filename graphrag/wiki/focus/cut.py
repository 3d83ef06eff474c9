"""The greedy cut: Doughnut's FocusContext procedure replayed on a trace for one combined budget.

For a combined budget B (``tokenLimit``), as ``FocusContextRetrievalService.retrieve`` at b2c0268c09:

1. The focus body is cut to ``min(1500, max(0, B))`` tokens; R = ``max(0, B - its estimate)``.
2. Folder peers take part only when R >= 100: then ``sampleSiblings`` is the focus's peer sample, the
   wiki budget is ``floor(R * 3/4)`` and the sibling budget the rest; otherwise siblings are ``[]``,
   the wiki budget is R and the sibling budget 0.
3. With max depth < 1 or R <= 0 there are no related notes.
4. Wiki notes: ladder entries are emitted while the remaining wiki budget is positive; each costs
   ``max(1, estimate(its cut body))`` and the one that overshoots is kept.
5. Folder peers: anchors are the focus (depth 0) then every emitted wiki note; an anchor at depth w
   offers the first ``sample_cap(w + 1)`` live members of its folder (or notebook root) that are not
   itself, the focus or a claimed note; offers in (anchor depth, anchor index) order, first one per
   note wins; a peer is skipped when it costs more than what remains (a later cheaper one may still
   get in) and the phase stops once nothing remains. A peer has depth w + 1 and its anchor's path.

From a trace's *full limit* on (:func:`full_limit`) every budget shows all the trace holds, so
every such tokenLimit has one answer, which a reader keeps once (:func:`shared_limit`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Hashable
from itertools import accumulate
from typing import TypeVar

from graphrag.wiki.approx_tokens import byte_limit, cut_and_measure, java_utf8_length, tokens_of
from graphrag.wiki.focus.peers import Offerings, ShownNote, offer_costs, offerings, peers
from graphrag.wiki.focus.render import focus_json, path_json, related_json, results_json
from graphrag.wiki.focus.trace import NoteFields, Trace
from graphrag.wiki.focus.types import FocusContextResult, FocusNoteOut, RelatedNoteOut, TraceTooSmall

__all__ = ["cut", "cut_json", "focus_uri", "full_limit", "shared_limit"]

T = TypeVar("T")


def focus_uri(title: str) -> str:
    """``FocusContextWikiUri.ofFocusNote``: the focus is named without its notebook."""
    return f"[[{title}]]"


Shown = list[ShownNote]


def cut(trace: Trace, token_limit: int) -> FocusContextResult:
    """The FocusContextResult Doughnut computes at combined budget ``token_limit``."""
    focus, emitted, peer_notes = _select(trace, token_limit)
    ladder = trace.wiki
    shown = [(ladder.ids[k], ladder.depths[k], k) for k in range(emitted)] + peer_notes
    return FocusContextResult(focus, tuple(_shown(trace.notes[i], d, _path(trace, a))
                                           for i, d, a in shown))


def cut_json(trace: Trace, token_limit: int) -> bytes:
    """``result_json(cut(trace, token_limit))``, joined from the notes' stored fragments and the
    ladder's path JSON: a stored trace's shown notes and paths are never parsed. The wiki notes
    shown are always the ladder's first entries, so their JSON is a prefix of the ladder's
    (:func:`_ladder_json`); the peers are joined note by note."""
    focus, emitted, peer_notes = _select(trace, token_limit)
    related: list[bytes | memoryview] = [_ladder_json(trace, emitted)] if emitted else []
    fragments, paths = trace.notes.fragments, _PeerPaths(trace)
    for note_id, depth, anchor in peer_notes:
        head, tail = fragments(note_id)
        related.append(related_json(head, depth, paths[anchor], tail))
    return results_json(_focus_json(trace, focus, token_limit), related)


class _PeerPaths(dict[int, bytes]):
    """The retrieval paths' JSON by anchor (-1 the focus), each written or cut out once per
    answer: a step's from the trace, the focus's (``[[title]]``) when a peer of it first shows
    it."""

    def __init__(self, trace: Trace) -> None:
        super().__init__()
        self.trace = trace

    def __missing__(self, anchor: int) -> bytes:
        path = self[anchor] = (self.trace.wiki.path_json(anchor) if anchor >= 0
                               else path_json(_path(self.trace, -1)))
        return path


def shared_limit(trace: Trace, token_limit: int) -> int:
    """The least tokenLimit known to give ``token_limit``'s answer: :func:`full_limit` for a limit
    at or above it (within the trace), else ``token_limit`` itself. A reader keeps one answer for
    all the limits that share it."""
    full = _derived(trace, ("full limit",), lambda: full_limit(trace))
    if full is None or not full <= token_limit <= trace.max_token_limit:
        return token_limit
    return full


def full_limit(trace: Trace) -> int | None:
    """A budget from which every larger one (up to the trace's) shows everything the trace holds,
    so gives the same answer (at least the focus cap: a smaller budget may show it all too); None
    when there is none (an incomplete ladder or peer list, whose large budgets the trace does not
    replay) or the costs are not a computation's (one below 1: the greedy steps would not be
    monotone, so a larger budget could show other notes).

    From the focus cap on, the focus (its body cut to the cap) and its estimate stay the same. With
    R the budget less that estimate, peers take part once R reaches the gate, every ladder entry
    is emitted once the wiki share exceeds what all but the last cost (the entry that overshoots
    is kept; a complete ladder then ends), and every offer fits once the peer share reaches what
    the offers cost; both shares only grow with R."""
    params = trace.params
    if trace.sample_siblings is None or (len(trace.notes) and trace.least_cost < 1):
        return None
    _, _, tokens = _focus_body(trace, params.focus_content_cap)
    needs = [params.peer_gate] + (_related_needs(trace) if trace.max_depth >= 1 else [])
    full = max(params.focus_content_cap, tokens + max(needs))
    return full if full <= trace.max_token_limit else None


def _related_needs(trace: Trace) -> list[int]:
    """The least R at which every ladder entry is emitted and the least at which every offer then
    fits (past the trace's limit when never); [R past it] when the trace cannot show them all."""
    params, most = trace.params, trace.max_token_limit
    spent, rising = _derived(trace, ("spent",), lambda: _spent(trace))
    if not trace.wiki_complete or not rising:
        return [most + 1]
    emitted = len(spent) - 1
    costs = offer_costs(_offerings(trace), emitted)
    if costs is None:
        return [most + 1]
    last = spent[-2] if emitted else -1  # (the last entry is emitted once the one before fits)
    return [_least(lambda r: params.wiki_budget(r) > last, most),
            _least(lambda r: r - params.wiki_budget(r) >= costs, most)]


def _least(holds: Callable[[int], bool], most: int) -> int:
    """The least r in [0, most] for which ``holds`` (false, then true for good) holds; most + 1
    when it never does."""
    low, high = 0, most + 1
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle + 1, high)
    return low


def _related(trace: Trace, note_id: int, depth: int, anchor: int) -> bytes:
    """A ladder step's object (``anchor``: its index)."""
    head, tail = trace.notes.fragments(note_id)
    return related_json(head, depth, trace.wiki.path_json(anchor), tail)


def _ladder_json(trace: Trace, emitted: int) -> memoryview:
    """The first ``emitted`` ladder entries' objects, comma-separated: a view of the ladder's
    JSON the trace keeps (``("ladder",)`` in Trace.derived: the bytes and where each entry ends),
    written further when a cut needs more: the first cut writes exactly what it shows (most
    traces are cut once: a note's first read at a new limit), a later one at least doubles what
    is written, so a trace cut at rising limits writes each entry about once. The kept value is
    replaced, never changed in place, so threads sharing the trace read a whole one."""
    kept: tuple[bytes, tuple[int, ...]] = trace.derived.get(("ladder",), (b"", (0,)))
    written, ends = kept
    if emitted >= len(ends):
        more = range(len(ends) - 1, min(len(trace.wiki.ids), max(emitted, 2 * (len(ends) - 1))))
        written, ends = _extended(trace, written, ends, more, emitted)
        trace.derived[("ladder",)] = (written, ends)
    return memoryview(written)[: ends[emitted]]


def _extended(trace: Trace, written: bytes, ends: tuple[int, ...], steps: range,
              needed: int) -> tuple[bytes, tuple[int, ...]]:
    """The kept ladder JSON with ``steps`` written on; the steps beyond ``needed`` stop at the
    first note the trace does not hold (what no cut shows is never asked for)."""
    ladder, cost_of = trace.wiki, trace.notes.cost
    parts, grown, size = [written], list(ends), len(written)
    for k in steps:
        if k >= needed and cost_of(ladder.ids[k]) is None:
            break
        entry = _related(trace, ladder.ids[k], ladder.depths[k], k)
        parts.append(b"," + entry if size else entry)
        size += len(parts[-1])
        grown.append(size)
    return b"".join(parts), tuple(grown)


#: how many derived values a cut keeps on one trace (Trace.derived): a trace cut at many limits
#: keeps the first ones and computes the others each time
MAX_DERIVED = 48


def _derived(trace: Trace, key: Hashable, make: Callable[[], T]) -> T:
    """``make()``, kept on the trace under ``key`` while it keeps fewer than MAX_DERIVED."""
    kept = trace.derived
    try:
        value: T = kept[key]
    except KeyError:
        value = make()
        if len(kept) < MAX_DERIVED:
            kept[key] = value
    return value


def _focus_json(trace: Trace, focus: FocusNoteOut, token_limit: int) -> bytes:
    """The focus note's bytes; the same for every tokenLimit that keeps the whole capped body,
    so kept for those (by whether peers show)."""
    if token_limit < trace.params.focus_content_cap:
        return focus_json(focus)
    return _derived(trace, ("focus", bool(focus.sample_siblings)), lambda: focus_json(focus))


def _path(trace: Trace, anchor: int) -> tuple[str, ...]:
    return trace.wiki.path(anchor) if anchor >= 0 else (focus_uri(trace.focus.title),)


def _select(trace: Trace, token_limit: int) -> tuple[FocusNoteOut, int, Shown]:
    """The focus note, how many ladder entries are emitted (the first related notes shown), and
    the peers shown after them (id, depth, path) in answer order."""
    if token_limit > trace.max_token_limit:
        raise TraceTooSmall(f"trace sized for {trace.max_token_limit} tokens, asked {token_limit}")
    params = trace.params
    body, truncated, tokens = _focus_body(trace, token_limit)
    related = max(0, token_limit - tokens)
    with_peers = related >= params.peer_gate
    focus = _focus_note(trace, body, truncated, _siblings(trace) if with_peers else ())
    if trace.max_depth < 1 or related <= 0:
        return focus, 0, []
    wiki_budget = params.wiki_budget(related) if with_peers else related
    emitted = _wiki_prefix(trace, wiki_budget)
    if not with_peers:
        return focus, emitted, []
    return focus, emitted, peers(_offerings(trace), emitted, related - wiki_budget, trace.least_cost)


def _offerings(trace: Trace) -> Offerings:
    """What every budget's peers phase reads (graphrag.wiki.focus.peers), kept on the trace."""
    return _derived(trace, ("offerings",), lambda: offerings(trace))


def _focus_body(trace: Trace, token_limit: int) -> tuple[str | None, bool, int]:
    """The focus body cut to the budget's cap, whether it is shorter than the note's, and its
    estimate. A stored body that fits is kept whole (``truncate_tokens`` keeps it); one that does
    not is cut to a strict prefix, shorter in UTF-16 units too."""
    stored = trace.focus.content
    if stored is None:
        return None, False, 0
    cap = min(trace.params.focus_content_cap, max(0, token_limit))
    size = _derived(trace, ("focus size",), lambda: java_utf8_length(stored))
    if size <= byte_limit(cap):
        return stored, trace.focus.content_shortened, tokens_of(size)
    body, body_size = cut_and_measure(stored, cap)
    return body, True, tokens_of(body_size)


def _siblings(trace: Trace) -> tuple[str, ...]:
    if trace.sample_siblings is None:
        raise TraceTooSmall("the trace holds no folder siblings")
    return trace.sample_siblings


def _focus_note(
    trace: Trace, body: str | None, truncated: bool, siblings: tuple[str, ...]
) -> FocusNoteOut:
    f = trace.focus
    return FocusNoteOut(
        f.notebook,
        f.title,
        f.folder_path,
        0,
        trace.outgoing_links,
        trace.inbound_references,
        siblings,
        f.created_at_ms,
        body,
        truncated,
    )


def _shown(fields: NoteFields, depth: int, path: tuple[str, ...]) -> RelatedNoteOut:
    return RelatedNoteOut(
        fields.notebook,
        fields.title,
        fields.folder_path,
        depth,
        path,
        fields.created_at_ms,
        fields.content,
        fields.content_truncated,
    )


def _wiki_prefix(trace: Trace, budget: int) -> int:
    """How many ladder entries are emitted while the remaining wiki budget is positive: after k
    entries what remains is ``budget - spent[k]`` (``spent``: the costs summed), so the first k
    whose ``spent[k]`` reaches the budget."""
    spent, rising = _derived(trace, ("spent",), lambda: _spent(trace))
    emitted = (bisect_left(spent, budget) if rising
               else next((k for k, sum_k in enumerate(spent) if sum_k >= budget), len(spent)))
    if emitted == len(spent) and not trace.wiki_complete:
        raise TraceTooSmall("the wiki ladder ends before the budget does")
    return min(emitted, len(spent) - 1)


def _spent(trace: Trace) -> tuple[list[int], bool]:
    """The ladder's costs summed (entry k: what the first k entries cost; a cost the trace cannot
    show counts 0), and whether the sums never fall (no cost is negative: a damaged trace's sums
    are walked, not bisected)."""
    cost_of = trace.notes.cost
    costs = [cost_of(i) or 0 for i in trace.wiki.ids]
    return list(accumulate(costs, initial=0)), min(costs, default=0) >= 0
