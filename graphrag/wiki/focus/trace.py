"""The budget-independent trace of one focus-context computation, and its JSON form.

A :class:`Trace` holds everything Doughnut's procedure reads for any combined budget from 1 up to
``max_token_limit``, so :func:`graphrag.wiki.focus.cut.cut` replays the procedure for any such budget
without the database:

* the focus's rendered fields, its body cut to ``min(focus cap, max_token_limit)`` tokens (a smaller
  budget cuts it again: re-truncation equals truncating the original, see
  :mod:`graphrag.wiki.approx_tokens`) and whether that already shortened it;
* the focus's outgoing, inbound (cap 20) and sibling (cap 6) URI lists;
* the wiki ladder: every wiki note any budget can emit, in emission order, with depth and path. Depth
  d+1 only runs when every note of depth d got in, so the notes emitted for a wiki budget W are
  exactly the ladder entries whose preceding costs sum to less than W;
* per peer group (a folder, or a notebook root), a prefix of its live members in sampling order long
  enough for every anchor's cap after excluding any set of claimed notes;
* per note, the fields a related note shows and its cost;
* the facts read (``note:X``, ``links:P``, ``inbound:T``, ``peers:<notebook>:<folder|root>``,
  ``folder:F``, ``notebook:N``) for exact invalidation.

The stored form (:meth:`Trace.to_bytes`, format 3) is one compact JSON line of everything but the
ladder's paths and the notes' fields (the ladder as two columns, ``wikiIds`` and ``wikiDepths``; the
notes' ids, costs and groups as three lists; each following line's length), then one line per ladder
step, its retrieval path as the JSON array an answer writes, then two lines per note: the note's
members as every answer writes them, before ``depth`` and after ``retrievalPath``
(:attr:`NoteFields.fragments`). Compact JSON never holds a raw newline, and the lengths let a replay
cut out only the lines it reads (graphrag.wiki.focus.stored, graphrag.wiki.focus.ladder): its cut
reads ids, depths, costs and groups from the first line, and its JSON answer joins the shown notes'
lines and their paths' lines as they are (graphrag.wiki.focus.cut.cut_json), so of the tens of notes
and steps a trace holds it parses none. A path line is parsed (and checked) only when a step itself
is read (markdown, equality). Each note's fragments are rendered once per view and shared by every
trace that holds it.

Format 2, written before, held the ladder inside the first line (``wiki``: ``{"id", "depth",
"path"}`` per step) and only the notes' lines after it; it is still read. Parsing that first line
took a third of a replay's time, most of it the ladder's paths, which a replay only copies out.

The JSON form (:meth:`Trace.to_json`, format 1: the notes inside, note ids as dict keys in decimal)
is what snapshots held before format 2; it is still read. There a body that ends in half of a
surrogate pair (a Java cut can leave one) is not valid UTF-8, so such a text is stored as
``{"utf16le": "<hex>"}`` instead of a string; a fragment writes it as Jackson does (``\\uD83D``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from graphrag.core.jsonload import loads
from graphrag.wiki.focus.fields import FocusFields, NoteFields, PeerList, WikiStep, group_key, text_out
from graphrag.wiki.focus.ladder import BuiltLadder, DictLadder, Ladder, LineLadder
from graphrag.wiki.focus.stored import HeldNotes, JsonNotes, LineNotes, Lines, ListedFacts, text_in
from graphrag.wiki.focus.types import FocusContextParams
from graphrag.wiki.model import Viewer

__all__ = [
    "JSON_FORMAT", "TRACE_FORMAT", "BuiltLadder", "FocusFields", "Ladder", "NoteFields", "PeerList",
    "Trace", "WikiStep", "group_key",
]

TRACE_FORMAT = 3
#: the stored form before format 3 (the ladder's steps inside the first line); still read
LADDER_INSIDE_FORMAT = 2
#: the JSON form (:meth:`Trace.to_json`), one document with the notes inside
JSON_FORMAT = 1
#: the deepest trace any stored form is read with: a request's depth is at most 10 (the CLI's
#: bound; Doughnut's is 2), and a replay's peer caps take a step per level, so a trace naming a
#: deeper one is damaged, not served
MAX_STORED_DEPTH = 64


@dataclass(frozen=True)
class Trace:
    """Everything a focus-context result depends on, for every budget up to ``max_token_limit``.

    ``sample_siblings`` is None when no such budget leaves room for folder peers (not loaded).
    ``wiki_complete`` is false when the ladder stops because no budget can reach further.
    """

    params: FocusContextParams
    focus_id: int
    seed: int | None
    viewer: Viewer
    max_depth: int
    max_token_limit: int
    focus: FocusFields
    outgoing_links: tuple[str, ...]
    inbound_references: tuple[str, ...]
    sample_siblings: tuple[str, ...] | None
    wiki: Ladder
    wiki_complete: bool
    notes: HeldNotes
    groups: Mapping[str, PeerList]
    facts: AbstractSet[str]

    @cached_property
    def derived(self) -> dict[Hashable, Any]:
        """What cuts derived from this trace, kept for the next cut of it (a reader keeps the
        traces it parsed, so one trace is cut again and again): values a cut computes the same
        each time, filed by what they are derived from (graphrag.wiki.focus.cut). Threads
        sharing the trace may both compute one; they store equal values."""
        return {}

    @cached_property
    def least_cost(self) -> int:
        """The smallest cost of a note the trace holds (0 when it holds none)."""
        return self.notes.least_cost()

    def to_bytes(self) -> bytes:
        """The stored form: a JSON line of everything but the ladder's paths and the notes' fields
        (``wikiIds`` and ``wikiDepths``; ``noteIds``, ``noteCosts`` and ``noteGroups`` in their
        place), then each ladder step's path JSON a line, then each note's two fragments
        (:attr:`NoteFields.fragments`) a line each, in ``noteIds`` order. Compact JSON never holds
        a raw newline, so a replay splits the lines and parses none of the ones it joins."""
        ids, wiki = sorted(self.notes), self.wiki
        spine = self._spine(TRACE_FORMAT) | {
            "wikiIds": list(wiki.ids), "wikiDepths": list(wiki.depths),
            "noteIds": ids, "noteCosts": [self.notes[i].cost for i in ids],
            "noteGroups": [self.notes[i].group for i in ids]}
        lines = [*map(wiki.path_json, range(len(wiki))),
                 *(part for i in ids for part in self.notes[i].fragments)]
        spine["lineBytes"] = list(map(len, lines))
        return orjson.dumps(spine) + b"\n" + b"\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (format 1): one document, the notes' fields inside."""
        wiki = [{"id": s.note_id, "depth": s.depth, "path": list(s.path)} for s in self.wiki]
        return self._spine(JSON_FORMAT) | {
            "wiki": wiki, "notes": {str(i): n.json_form for i, n in sorted(self.notes.items())}}

    def _spine(self, form: int) -> dict[str, Any]:
        """Every member but the ladder and the notes, which each form writes its own way."""
        return {
            "format": form,
            "params": self.params.to_json(),
            "focusId": self.focus_id,
            "seed": self.seed,
            "viewer": self.viewer.to_json(),
            "maxDepth": self.max_depth,
            "maxTokenLimit": self.max_token_limit,
            "focus": _focus_out(self.focus),
            "outgoingLinks": list(self.outgoing_links),
            "inboundReferences": list(self.inbound_references),
            "sampleSiblings": None if self.sample_siblings is None else list(self.sample_siblings),
            "wikiComplete": self.wiki_complete,
            "groups": {k: {"ids": list(g.ids), "complete": g.complete} for k, g in self.groups.items()},
            "facts": sorted(self.facts),
        }

    @staticmethod
    def from_bytes(data: bytes) -> Trace:
        """A trace from its stored form (:meth:`to_bytes`, or format 2's), or from its JSON
        form's bytes (a snapshot written before format 2); ValueError when it is none of them."""
        at = data.find(b"\n")
        if at < 0:
            return Trace.from_json(loads(data))
        spine = loads(data[:at])
        if spine.get("format") == TRACE_FORMAT:
            return _from_lines(spine, data, at + 1)
        if spine.get("format") != LADDER_INSIDE_FORMAT:
            raise ValueError(f"unknown trace format {spine.get('format')!r}")
        _check_lists(spine)
        notes = LineNotes(spine["noteIds"], spine["noteCosts"], spine["noteGroups"],
                          Lines(data, spine["lineBytes"], at + 1))
        return _parsed(spine, notes, _dict_ladder(spine))

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Trace:
        """A trace from its JSON form (format 1)."""
        if data.get("format") != JSON_FORMAT:
            raise ValueError(f"unknown trace format {data.get('format')!r}")
        return _parsed(data, JsonNotes(data["notes"]), _dict_ladder(data))


def _from_lines(spine: Mapping[str, Any], data: bytes, start: int) -> Trace:
    """What a replay reads later is checked now (ValueError), so a stored trace either parses
    into one every cut reads without failing, or is no trace: the columns' types (a depth an
    answer writes: an integer from 1 to the trace's depth), the facts' (a list; its members are
    checked when the set is first asked for: a replay never asks), the lines' count and lengths,
    and that every ladder step is a held note."""
    groups, depths, facts = spine["noteGroups"], spine["wikiDepths"], spine["facts"]
    if not (all(map(_int_list, map(spine.__getitem__, _INT_COLUMNS))) and isinstance(groups, list)
            and set(map(type, groups)) <= {str, type(None)} and isinstance(facts, list)
            and _depths_ok(depths, spine["maxDepth"])):
        raise ValueError("a trace's columns are not lists of the documented types")
    steps, lines = len(spine["wikiIds"]), Lines(data, spine["lineBytes"], start)
    ladder = LineLadder(spine["wikiIds"], spine["wikiDepths"], lines.part(0, steps))
    notes = LineNotes(spine["noteIds"], spine["noteCosts"], groups, lines.part(steps, len(lines)))
    if not notes.holds_all(ladder.ids):
        raise ValueError("a trace's ladder names a step it cannot show")
    return _parsed(spine, notes, ladder)


_INT_COLUMNS = ("wikiIds", "noteIds", "noteCosts", "lineBytes")  # (depths: _depths_ok)
_INT_TYPE = frozenset({int})


def _int_list(values: Any) -> bool:
    """A JSON list of integers: its sum is an int. A float among them makes the sum a float, and
    any other JSON value (text, null, list, object) cannot be summed; ``true`` and ``false`` pass,
    as the integers 1 and 0 Python reads them as."""
    try:
        return isinstance(values, list) and type(sum(values)) is int
    except TypeError:
        return False


def _depths_ok(depths: Any, max_depth: Any) -> bool:
    """Depths an answer writes (integers from 1 to the trace's depth) under a depth in bounds."""
    return (isinstance(depths, list) and set(map(type, depths)) <= _INT_TYPE
            and type(max_depth) is int and 0 <= max_depth <= MAX_STORED_DEPTH
            and (not depths or (min(depths) >= 1 and max(depths) <= max_depth)))


def _dict_ladder(data: Mapping[str, Any]) -> DictLadder:
    """The ladder of a form before format 3, its depths checked as format 3's are."""
    ladder = DictLadder(data["wiki"])
    if not _depths_ok(ladder.depths, data["maxDepth"]):
        raise ValueError("a trace's depths are not integers from 1 to its depth")
    return ladder


def _check_lists(spine: Mapping[str, Any]) -> None:
    """Format 2's checks (:func:`_from_lines` for format 3): the note lists, and every ladder
    step's id (a held note), depth and path."""
    ids, groups = spine["noteIds"], spine["noteGroups"]
    if not (_int_list(ids) and _int_list(spine["noteCosts"]) and _int_list(spine["lineBytes"])
            and isinstance(groups, list) and set(map(type, groups)) <= {str, type(None)}):
        raise ValueError("a trace's note lists are not lists of the documented types")
    held, wiki = set(ids), spine["wiki"]
    if not isinstance(wiki, list) or not all(map(_step_ok, wiki, [held] * len(wiki))):
        raise ValueError("a trace's ladder names a step it cannot show")


def _step_ok(step: Any, held: set[int]) -> bool:
    return (isinstance(step, dict) and type(step.get("id")) is int and step["id"] in held
            and type(step.get("depth")) is int and isinstance(step.get("path"), list))


def _parsed(data: Mapping[str, Any], notes: HeldNotes, wiki: Ladder) -> Trace:
    siblings = data["sampleSiblings"]
    return Trace(
        params=FocusContextParams.from_json(dict(data["params"])),
        focus_id=int(data["focusId"]),
        seed=data["seed"],
        viewer=Viewer.from_json(data["viewer"]),
        max_depth=int(data["maxDepth"]),
        max_token_limit=int(data["maxTokenLimit"]),
        focus=_focus_in(data["focus"]),
        outgoing_links=tuple(data["outgoingLinks"]),
        inbound_references=tuple(data["inboundReferences"]),
        sample_siblings=None if siblings is None else tuple(siblings),
        wiki=wiki,
        wiki_complete=bool(data["wikiComplete"]),
        notes=notes,
        groups={k: PeerList(tuple(g["ids"]), bool(g["complete"])) for k, g in data["groups"].items()},
        facts=ListedFacts(data["facts"]),
    )


def _focus_out(f: FocusFields) -> dict[str, Any]:
    return {
        "notebook": f.notebook,
        "title": f.title,
        "folderPath": f.folder_path,
        "createdAtMs": f.created_at_ms,
        "content": text_out(f.content),
        "contentShortened": f.content_shortened,
        "group": f.group,
    }


def _focus_in(d: Mapping[str, Any]) -> FocusFields:
    return FocusFields(
        d["notebook"],
        d["title"],
        d["folderPath"],
        int(d["createdAtMs"]),
        text_in(d["content"]),
        bool(d["contentShortened"]),
        d["group"],
    )
