"""A direct, unbatched transcription of Doughnut's FocusContext retrieval, as a test oracle.

It follows ``FocusContextRetrievalService``, ``FocusContextWikiBfsExpander`` and
``FocusContextFolderPeerAppender`` (b2c0268c09) step by step for ONE budget, in the Java style (a path
map keyed by note id, floating-point 0.75 and 3.75, a binary search over UTF-16 code units), against
the SQL rules of :class:`tests.wiki_support.WikiGraph`. It shares no code with the implementation
under test apart from the output data classes.
"""

from __future__ import annotations

import math
import re

from graphrag.wiki.focus.types import FocusContextResult, FocusNoteOut, RelatedNoteOut
from graphrag.wiki.model import Viewer, WikiNote
from tests.wiki_support import WikiGraph

# Java's (?U)\s is the Unicode White_Space property (not Python's str.isspace, which adds U+001C-1F).
_WHITE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_TRIM = re.compile(
    f"\\A[{_WHITE}\u200b\u200c\u200d\u2060\ufeff]+|[{_WHITE}\u200b\u200c\u200d\u2060\ufeff]+\\Z"
)


def trimmed(name: str) -> str:
    """DisplayName: surrounding whitespace (and zero-width characters) removed."""
    return _TRIM.sub("", name)


def units(text: str) -> list[int]:
    raw = text.encode("utf-16-le", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]


def java_bytes(code_units: list[int]) -> int:
    """String.getBytes(UTF_8).length: pairs are 4 bytes, a lone surrogate is '?'."""
    size, i = 0, 0
    while i < len(code_units):
        unit = code_units[i]
        if (
            0xD800 <= unit <= 0xDBFF
            and i + 1 < len(code_units)
            and 0xDC00 <= code_units[i + 1] <= 0xDFFF
        ):
            size, i = size + 4, i + 2
            continue
        size += 1 if unit < 0x80 or 0xD800 <= unit <= 0xDFFF else 2 if unit < 0x800 else 3
        i += 1
    return size


def java_truncate(text: str | None, max_tokens: int) -> str | None:
    if text is None or text == "":
        return text
    max_bytes = math.floor(max_tokens * 3.75)
    code_units = units(text)
    if java_bytes(code_units) <= max_bytes:
        return text
    low, high = 0, len(code_units)
    while low < high:
        mid = (low + high + 1) // 2
        if java_bytes(code_units[:mid]) <= max_bytes:
            low = mid
        else:
            high = mid - 1
    raw = b"".join(u.to_bytes(2, "little") for u in code_units[:low])
    return raw.decode("utf-16-le", "surrogatepass")


def java_estimate(text: str | None) -> int:
    if text is None or text == "":
        return 0
    return math.ceil(java_bytes(units(text)) / 3.75)


def sample_cap(depth: int) -> int:
    cap = 6
    for _ in range(1, depth):
        cap = cap // 3
    return cap


class Reference:
    def __init__(self, graph: WikiGraph, viewer: Viewer, seed: int | None) -> None:
        self.g, self.viewer, self.seed = graph, viewer, seed

    def uri(self, note: WikiNote) -> str:
        if note.notebook_id is None:
            return f"[[{trimmed(note.title)}]]"
        return f"[[{trimmed(self.g.notebooks[note.notebook_id].name)}: {trimmed(note.title)}]]"

    def folder_path(self, note: WikiNote) -> str:
        names: list[str] = []
        folder_id = note.folder_id
        while folder_id is not None:
            names.insert(0, trimmed(self.g.folders[folder_id].name))
            folder_id = self.g.folders[folder_id].parent_folder_id
        return " / ".join(names)

    def outgoing(self, parent: WikiNote) -> list[WikiNote]:
        found: dict[int, WikiNote] = {}
        for target_id in self.g.targets(parent.id):
            target = self.g.notes.get(target_id)
            if target is None or target.deleted:
                continue
            notebook_id = target.notebook_id if target.notebook_id is not None else parent.notebook_id
            if notebook_id is None or not self.g.access(self.viewer, notebook_id).readable:
                continue
            found.setdefault(target_id, target)
        return list(found.values())

    def inbound(self, target: WikiNote, exclude: set[int], cap: int) -> list[WikiNote]:
        if cap <= 0:
            return []
        ids = [i for i in self.g.referrer_ids(target.id, self.seed, self.viewer) if i not in exclude]
        return [self.g.notes[i] for i in ids[:cap]]

    def peers(self, anchor: WikiNote, focus_id: int, exclude: set[int], cap: int) -> list[WikiNote]:
        if cap <= 0:
            return []
        if anchor.folder_id is None and anchor.notebook_id is None:
            return []
        ids = self.g.member_ids(anchor.notebook_id, anchor.folder_id, self.seed)
        ids = [i for i in ids if i not in exclude and i not in (anchor.id, focus_id)]
        return [self.g.notes[i] for i in ids[:cap]]

    def materialize(self, note: WikiNote, depth: int, path: list[str]) -> tuple[RelatedNoteOut, int]:
        body = java_truncate(note.content, 200)
        truncated = (
            body is not None and note.content is not None and len(units(body)) < len(units(note.content))
        )
        shown = RelatedNoteOut(
            trimmed(self.g.notebooks[note.notebook_id].name) if note.notebook_id else None,
            trimmed(note.title),
            self.folder_path(note),
            depth,
            tuple(path),
            note.created_at_ms,
            body,
            truncated,
        )
        return shown, max(1, java_estimate(body))


def reference_result(
    graph: WikiGraph,
    focus_id: int,
    budget: int,
    *,
    viewer: Viewer | None = None,
    seed: int | None = None,
    max_depth: int = 2,
    dedupe_across_depths: bool = False,
) -> FocusContextResult:
    focus = graph.notes[focus_id]
    assert focus.notebook_id is not None
    viewer = viewer or graph.notebooks[focus.notebook_id].owner
    ref = Reference(graph, viewer, seed)
    cap = min(1500, max(0, budget))
    body = java_truncate(focus.content, cap)
    truncated = (
        body is not None and focus.content is not None and len(units(body)) < len(units(focus.content))
    )
    outgoing = [ref.uri(n) for n in ref.outgoing(focus)]
    inbound = [ref.uri(n) for n in ref.inbound(focus, {focus_id}, 20)]
    related_total = max(0, budget - java_estimate(body))
    with_peers = related_total >= 100
    siblings = (
        [ref.uri(n) for n in ref.peers(focus, focus_id, set(), sample_cap(1))] if with_peers else []
    )
    focus_out = FocusNoteOut(
        trimmed(graph.notebooks[focus.notebook_id].name),
        trimmed(focus.title),
        ref.folder_path(focus),
        0,
        tuple(outgoing),
        tuple(inbound),
        tuple(siblings),
        focus.created_at_ms,
        body,
        truncated,
    )
    related: list[RelatedNoteOut] = []
    if max_depth < 1 or related_total <= 0:
        return FocusContextResult(focus_out, ())
    if with_peers:
        wiki_budget = math.floor(related_total * 0.75)  # a double product, as in Java
        sibling_budget = related_total - wiki_budget
    else:
        wiki_budget, sibling_budget = related_total, 0
    focus_uri = f"[[{trimmed(focus.title)}]]"
    paths: dict[int, list[str]] = {focus_id: [focus_uri]}
    frontier = [focus]
    claimed = {focus_id}
    anchors: list[tuple[WikiNote, int, list[str]]] = [(focus, 0, [focus_uri])]
    remaining = wiki_budget
    for depth in range(1, max_depth + 1):
        if remaining <= 0 or not frontier:
            break
        proposals: list[tuple[int, int, list[str]]] = []
        for parent in frontier:
            parent_path = paths[parent.id]
            out = ref.outgoing(parent)
            exclude = {focus_id} | {o.id for o in out}
            sampled = ref.inbound(parent, exclude, sample_cap(depth))
            proposals += [(t.id, depth, [*parent_path, ref.uri(t)]) for t in out if t.id != focus_id]
            proposals += [(t.id, depth, [*parent_path, ref.uri(t)]) for t in sampled]
        first: dict[int, tuple[int, int, list[str]]] = {}
        for proposal in proposals:
            first.setdefault(proposal[0], proposal)
        ordered = [p for p in first.values() if not (dedupe_across_depths and p[0] in claimed)]
        next_frontier = []
        for note_id, note_depth, path in ordered:
            if remaining <= 0:
                break
            note = graph.notes[note_id]
            if note.notebook_id is None:
                continue
            shown, cost = ref.materialize(note, note_depth, path)
            remaining -= cost
            related.append(shown)
            claimed.add(note_id)
            paths[note_id] = path
            next_frontier.append(note)
            anchors.append((note, note_depth, path))
        frontier = next_frontier
    related += _peer_notes(ref, anchors, focus_id, claimed, sibling_budget)
    return FocusContextResult(focus_out, tuple(related))


def _peer_notes(
    ref: Reference,
    anchors: list[tuple[WikiNote, int, list[str]]],
    focus_id: int,
    claimed: set[int],
    budget: int,
) -> list[RelatedNoteOut]:
    if budget <= 0:
        return []
    offers = []
    for index, (anchor, depth, path) in enumerate(anchors):
        for peer in ref.peers(anchor, focus_id, claimed, sample_cap(depth + 1)):
            offers.append((depth, index, peer, path))
    offers.sort(key=lambda o: (o[0], o[1]))
    reserved, unique = set(claimed), []
    for offer in offers:
        if offer[2].id not in reserved:
            reserved.add(offer[2].id)
            unique.append(offer)
    shown: list[RelatedNoteOut] = []
    remaining = budget
    for depth, _, peer, path in unique:
        if remaining <= 0:
            break
        if peer.notebook_id is None:
            continue
        note, cost = ref.materialize(peer, depth + 1, path)
        if cost > remaining:
            continue
        remaining -= cost
        shown.append(note)
    return shown
