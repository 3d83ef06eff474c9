"""A GraphRAGResult as LLM-ready markdown, for the tree strategies: wavefront, layered, relationship-bfs.

The layout is a contract: agents and prompts may rely on it, so it only changes with a new version of
this docstring. ``graph_markdown(result, strategy=...)`` renders the 2025 result JSON (``focusNote`` and
``relatedNotes``) as follows; ``⏎`` stands for a line break, ``<...>`` for a value::

    # Note graph context of <focus uri>⏎
    ⏎
    Strategy: <strategy> (<how that strategy orders the related notes>)⏎
    Related notes: <count>⏎
    ⏎
    ## Focus note: <label>⏎
    ⏎
    <fields>
    - Contextual path: <ref> -> <ref> -> ... | none (a notebook head note)⏎
    - Children: <ref>, <ref>, ... | none⏎            (the same for Prior siblings, Younger siblings
    - Inbound references: ... | none⏎                  and Inbound references, in the JSON's order)
    <details>
    ⏎
    ## Related notes⏎
    ⏎
    None.⏎                                            (only when there are none; else:)
    By relation:⏎
    - <Readable relation> (<RelationValue>): #<rank>, #<rank> (<meaning>)⏎   (in order of first rank)
    ⏎
    ### <rank>. <label>⏎                             (one per related note, rank 1 = first in the JSON)
    ⏎
    - Relation: <Readable relation> (<RelationValue>)⏎
    <fields>
    <details>

``<fields>`` are bullet lines: ``- URI: /n<id>``; for a plain note ``- Title: <text>`` and
``- Parent: <ref> | none``; for a link note (one with a predicate) ``- Subject: <ref> | none``,
``- Predicate: <text>`` and ``- Object: <ref> | none``; then ``- Created at: <createdAt>``. ``<details>``
is ``- Details: none`` (null), ``- Details: empty`` (the empty string), or ``- Details:`` (``- Details
(truncated):`` when the service cut them) followed by an empty line and the details, verbatim, in a
fenced block: the fence is ``max(3, longest run of backticks in the details + 1)`` backticks (the rule of
Doughnut's FocusContextMarkdownRenderer.safeFence at commit b2c0268c09), so no note text can close it;
the opening fence carries the info string ``markdown``, the details follow, then one line break, then the
closing fence. Stripping that last line break gives the details back exactly.

Every text that comes from a note outside a fence (titles, predicates) is written as a JSON string
literal, with U+0085, U+2028 and U+2029 escaped as well, so it always stays on its line and can open
nothing. A ``<label>`` is the quoted title of a plain note, or ``<subject> --<predicate>--> <object>`` of
a link note (each quoted; ``(none)`` for an absent end). A ``<ref>`` is ``<label> (<uri>)``, or
``<label> (<uri>, #<rank>)`` when the note is a related note, or the bare ``<uri>`` when the result names
no title for it. Labels come from the result alone: the focus and related notes themselves first (in
order), then their parent/subject/object references; the first one seen for a URI wins.

The function is pure and deterministic: the same result and strategy give the same text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["RELATIONS", "STRATEGY_ORDERS", "fence_for", "graph_markdown", "inline"]

#: relationToFocusNote value -> (readable name, meaning); the readable names are part of the layout.
RELATIONS: dict[str, tuple[str, str]] = {
    "Self": ("Self", "the focus note itself"),
    "Parent": ("Parent", "the focus note's parent"),
    "Object": ("Object", "the note the focus link note points at"),
    "Child": ("Child", "a child of the focus note"),
    "PriorSibling": ("Prior sibling", "a sibling ordered before the focus note"),
    "YoungerSibling": ("Younger sibling", "a sibling ordered after the focus note"),
    "InboundReference": ("Inbound reference", "a link note pointing at the focus note"),
    "SubjectOfInboundReference": ("Subject of inbound reference",
                                  "the note an inbound link note belongs to"),
    "AncestorInContextualPath": ("Ancestor in contextual path", "an ancestor of the focus note"),
    "AncestorInObjectContextualPath": ("Ancestor in object contextual path",
                                       "an ancestor of the note the focus link note points at"),
    "ObjectOfReifiedChild": ("Object of reified child",
                             "the note a link-note child of the focus points at"),
    "SiblingOfParent": ("Sibling of parent", "a sibling of the focus note's parent"),
    "SiblingOfParentOfObject": ("Sibling of parent of object",
                                "a sibling of the parent of the focus link note's object"),
    "ChildOfSiblingOfParent": ("Child of sibling of parent", "a cousin of the focus note"),
    "ChildOfSiblingOfParentOfObject": ("Child of sibling of parent of object",
                                       "a cousin of the focus link note's object"),
    "InboundReferenceContextualPath": ("Inbound reference contextual path",
                                       "an ancestor of a link note pointing at the focus note"),
    "SiblingOfSubjectOfInboundReference": ("Sibling of subject of inbound reference",
                                           "another child of an inbound link note's subject"),
    "InboundReferenceToObjectOfReifiedChild": (
        "Inbound reference to object of reified child",
        "a link note pointing where a link-note child of the focus points"),
    "GrandChild": ("Grandchild", "a descendant two or more levels below the focus note"),
    "RemotelyRelated": ("Remotely related", "reached through a longer path"),
}

#: how each tree strategy orders relatedNotes (the rank in the layout is that order).
STRATEGY_ORDERS: dict[str, str] = {
    "wavefront": "related notes ranked by relevance score, most relevant first",
    "layered": "related notes in the order Doughnut's layered selection accepted them",
    "relationship-bfs": "related notes in breadth-first order, nearest first",
}

_LINE_BREAKS_JSON_KEEPS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_BACKTICK_RUN = re.compile("`+")
_LISTS = (("children", "Children"), ("priorSiblings", "Prior siblings"),
          ("youngerSiblings", "Younger siblings"), ("inboundReferences", "Inbound references"))

Note = Mapping[str, Any]


def inline(text: str) -> str:
    """``text`` as a one-line JSON string literal (quotes included) that cannot break the layout."""
    quoted = json.dumps(text, ensure_ascii=False)
    return "".join(_LINE_BREAKS_JSON_KEEPS.get(ch, ch) for ch in quoted)


def fence_for(details: str) -> str:
    """The shortest safe backtick fence: at least 3, and longer than any backtick run in ``details``."""
    longest = max((len(run) for run in _BACKTICK_RUN.findall(details)), default=0)
    return "`" * max(3, longest + 1)


def graph_markdown(result: Mapping[str, Any], *, strategy: str) -> str:
    """The layout of the module docstring for one GraphRAGResult (a parsed ``focusNote``/``relatedNotes``
    object). Raises ValueError for an unknown strategy or a value that is no GraphRAGResult."""
    if strategy not in STRATEGY_ORDERS:
        raise ValueError(f"no markdown layout for strategy {strategy!r}; "
                         f"choose from {', '.join(STRATEGY_ORDERS)}")
    focus, related = _parts(result)
    names = _Names(focus, related)
    head = [f"# Note graph context of {_text(focus, 'uri')}", "",
            f"Strategy: {strategy} ({STRATEGY_ORDERS[strategy]})", f"Related notes: {len(related)}"]
    lines = [*head, "", *_focus_section(focus, names), "", *_related_section(related, names)]
    return "\n".join(lines) + "\n"


# -- input -------------------------------------------------------------------------------------------
def _parts(result: Mapping[str, Any]) -> tuple[Note, list[Note]]:
    focus, related = result.get("focusNote"), result.get("relatedNotes")
    if not isinstance(focus, Mapping) or not isinstance(related, Sequence) or isinstance(related, str):
        raise ValueError("not a GraphRAGResult: needs a focusNote object and a relatedNotes list")
    if not all(isinstance(note, Mapping) for note in related):
        raise ValueError("not a GraphRAGResult: every related note must be an object")
    return focus, list(related)


def _text(note: Note, key: str) -> str:
    value = note.get(key)
    return value if isinstance(value, str) else ""


def _ref_of(note: Note, key: str) -> tuple[str, str] | None:
    """A ``{"uri", "title"}`` property as (uri, title), or None when absent."""
    value = note.get(key)
    if not isinstance(value, Mapping) or not isinstance(value.get("uri"), str):
        return None
    return value["uri"], _text(value, "title")


def _is_link(note: Note) -> bool:
    return "predicate" in note


def _uris(note: Note, key: str) -> list[str]:
    value = note.get(key)
    return [u for u in value if isinstance(u, str)] if isinstance(value, list) else []


# -- names -------------------------------------------------------------------------------------------
class _Names:
    """URI -> label and URI -> rank, read from the result alone (first seen wins)."""

    def __init__(self, focus: Note, related: Sequence[Note]) -> None:
        self.ranks: dict[str, int] = {}
        for rank, note in enumerate(related, start=1):
            self.ranks.setdefault(_text(note, "uri"), rank)
        self.labels: dict[str, str] = {}
        notes = [focus, *related]
        for note in notes:
            self.labels.setdefault(_text(note, "uri"), self.label(note))
        for ref in _refs(notes):
            self.labels.setdefault(ref[0], inline(ref[1]))

    def label(self, note: Note) -> str:
        if not _is_link(note):
            return inline(_text(note, "title"))
        ends = [_ref_of(note, key) for key in ("subjectUriAndTitle", "objectUriAndTitle")]
        subject, target = (inline(end[1]) if end else "(none)" for end in ends)
        return f"{subject} --{inline(_text(note, 'predicate'))}--> {target}"

    def ref(self, uri: str) -> str:
        label = self.labels.get(uri)
        if label is None:
            return uri
        rank = self.ranks.get(uri)
        return f"{label} ({uri})" if rank is None else f"{label} ({uri}, #{rank})"


def _refs(notes: Iterable[Note]) -> Iterable[tuple[str, str]]:
    for note in notes:
        for key in ("parentUriAndTitle", "subjectUriAndTitle", "objectUriAndTitle"):
            ref = _ref_of(note, key)
            if ref is not None:
                yield ref


# -- sections ----------------------------------------------------------------------------------------
def _fields(note: Note, names: _Names) -> list[str]:
    lines = [f"- URI: {_text(note, 'uri')}"]
    if _is_link(note):
        lines += [f"- Subject: {_ref_line(note, 'subjectUriAndTitle', names)}",
                  f"- Predicate: {inline(_text(note, 'predicate'))}",
                  f"- Object: {_ref_line(note, 'objectUriAndTitle', names)}"]
    else:
        lines += [f"- Title: {inline(_text(note, 'title'))}",
                  f"- Parent: {_ref_line(note, 'parentUriAndTitle', names)}"]
    return [*lines, f"- Created at: {_text(note, 'createdAt')}"]


def _ref_line(note: Note, key: str, names: _Names) -> str:
    ref = _ref_of(note, key)
    return "none" if ref is None else names.ref(ref[0])


def _focus_lists(focus: Note, names: _Names) -> list[str]:
    path = " -> ".join(names.ref(uri) for uri in _uris(focus, "contextualPath"))
    lines = [f"- Contextual path: {path or 'none (a notebook head note)'}"]
    for key, caption in _LISTS:
        listed = ", ".join(names.ref(uri) for uri in _uris(focus, key))
        lines.append(f"- {caption}: {listed or 'none'}")
    return lines


def _details(note: Note) -> list[str]:
    details = note.get("details")
    if not isinstance(details, str):
        return ["- Details: none"]
    if details == "":
        return ["- Details: empty"]
    fence = fence_for(details)
    caption = "- Details (truncated):" if note.get("detailsTruncated") is True else "- Details:"
    return [caption, "", f"{fence}markdown", details, fence]


def _focus_section(focus: Note, names: _Names) -> list[str]:
    lines = [f"## Focus note: {names.label(focus)}", "", *_fields(focus, names)]
    return [*lines, *_focus_lists(focus, names), *_details(focus)]


def _related_section(related: Sequence[Note], names: _Names) -> list[str]:
    lines = ["## Related notes", "", *_overview(related)]
    for rank, note in enumerate(related, start=1):
        lines += ["", f"### {rank}. {names.label(note)}", "",
                  f"- Relation: {_relation(_text(note, 'relationToFocusNote'))}"]
        lines += [*_fields(note, names), *_details(note)]
    return lines


def _relation(value: str) -> str:
    readable = RELATIONS.get(value, (value, ""))[0]
    return f"{readable} ({value})"


def _overview(related: Sequence[Note]) -> list[str]:
    if not related:
        return ["None."]
    ranks: dict[str, list[int]] = {}
    for rank, note in enumerate(related, start=1):
        ranks.setdefault(_text(note, "relationToFocusNote"), []).append(rank)
    lines = ["By relation:"]
    for value, numbers in ranks.items():
        meaning = RELATIONS.get(value, ("", ""))[1]
        suffix = f" ({meaning})" if meaning else ""
        lines.append(f"- {_relation(value)}: {', '.join(f'#{n}' for n in numbers)}{suffix}")
    return lines
