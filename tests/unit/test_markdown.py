"""The markdown layout of a GraphRAGResult (graphrag.tree.markdown): golden files on the bundled sample
notebook for every tree strategy, a reader written from the module's documented layout that must get
every fact of the JSON back, and the edge cases (link notes, null/empty/truncated details, backticks,
hostile titles, no related notes).

Golden files live in ``tests/golden/markdown``; after a deliberate layout change, rewrite them with
``GRAPHRAG_UPDATE_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphrag.tree.markdown import graph_markdown
from graphrag.tree.model import Relation
from storage.sample import SAMPLE_FOCUS_IDS, sample_notes
from tests.support import Graph, compute
from tests.unit.helpers import doc

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "markdown"
UPDATE = os.environ.get("GRAPHRAG_UPDATE_GOLDEN") == "1"
TREE_STRATEGIES = ("wavefront", "layered", "relationship-bfs")
FOCI = ("link_note", "hub", "cjk_long")
TOKEN_LIMIT = 1200
CREATED = "2025-01-02T03:04:05.000+00:00"


# -- a reader of the documented layout (written from the docstring, not from the code) -----------
@dataclass
class Section:
    heading: str
    fields: dict[str, str] = field(default_factory=dict)
    details: str | None = None
    truncated: bool = False


@dataclass
class Parsed:
    head: list[str]
    focus: Section
    related: list[Section]
    overview: list[str]


_OPEN = re.compile(r"^(`{3,})markdown$")
_FIELD = re.compile(r"^- ([A-Za-z ]+): (.*)$")


def _read_details(lines: list[str], i: int, section: Section) -> int:
    """``lines[i]`` is the details caption; returns the index after the closing fence."""
    section.truncated = lines[i] == "- Details (truncated):"
    assert lines[i + 1] == ""
    opened = _OPEN.match(lines[i + 2])
    assert opened, lines[i + 2]
    end = lines.index(opened.group(1), i + 3)  # the first line that is exactly the fence
    section.details = "\n".join(lines[i + 3:end])
    return end + 1


def _read_line(lines: list[str], i: int, section: Section) -> int:
    line = lines[i]
    if line in ("- Details:", "- Details (truncated):"):
        return _read_details(lines, i, section)
    if line == "- Details: empty":
        section.details = ""
    elif line != "- Details: none":
        matched = _FIELD.match(line)
        assert matched, line
        section.fields[matched.group(1)] = matched.group(2)
    return i + 1


def _read_section(lines: list[str], i: int, section: Section) -> int:
    """Field lines and details up to the next empty line (or the end); returns its index."""
    while i < len(lines) and lines[i] != "":
        i = _read_line(lines, i, section)
    return i


def parse(md: str) -> Parsed:
    assert md.endswith("\n") and not md.endswith("\n\n")
    lines = md[:-1].split("\n")
    i = next(k for k, line in enumerate(lines) if line.startswith("## Focus note: "))
    parsed = Parsed(lines[:i], Section(lines[i]), [], [])
    assert lines[i + 1] == ""
    i = _read_section(lines, i + 2, parsed.focus)
    assert lines[i:i + 3] == ["", "## Related notes", ""]
    i += 3
    if lines[i] == "None.":
        assert i + 1 == len(lines)
        return parsed
    assert lines[i] == "By relation:"
    i += 1
    while i < len(lines) and lines[i] != "":
        parsed.overview.append(lines[i])
        i += 1
    while i < len(lines):
        assert lines[i] == "" and lines[i + 1].startswith("### ") and lines[i + 2] == ""
        parsed.related.append(Section(lines[i + 1]))
        i = _read_section(lines, i + 3, parsed.related[-1])
    return parsed


def unquote(text: str) -> str:
    value = json.loads(text)
    assert isinstance(value, str)
    return value


_QUOTED_OR_ARROW = re.compile(r'"(?:[^"\\]|\\.)*"| -> ')


def split_path(text: str) -> list[str]:
    """The refs of a contextual path: split on `` -> `` outside the quoted titles."""
    parts, start = [], 0
    for token in _QUOTED_OR_ARROW.finditer(text):
        if token.group() == " -> ":
            parts.append(text[start:token.start()])
            start = token.end()
    return [*parts, text[start:]]


def ref_uri(text: str) -> str:
    """The URI of a ``<ref>``: ``label (uri)``, ``label (uri, #rank)`` or a bare uri."""
    matched = re.search(r"\((/n\d+)(?:, #\d+)?\)$", text)
    return matched.group(1) if matched else text


def assert_note_read_back(section: Section, note: dict[str, Any]) -> None:
    assert section.fields["URI"] == note["uri"]
    assert section.fields["Created at"] == note["createdAt"]
    assert section.details == note.get("details")
    assert section.truncated == (note.get("detailsTruncated") is True)
    if "predicate" in note:
        assert unquote(section.fields["Predicate"]) == note["predicate"]
        for caption, key in (("Subject", "subjectUriAndTitle"), ("Object", "objectUriAndTitle")):
            expected = note[key]["uri"] if key in note else "none"
            assert ref_uri(section.fields[caption]) == expected
        assert "Title" not in section.fields
    else:
        assert unquote(section.fields["Title"]) == note["title"]
        parent = note.get("parentUriAndTitle")
        assert ref_uri(section.fields["Parent"]) == (parent["uri"] if parent else "none")


def assert_read_back(md: str, result: dict[str, Any]) -> None:
    """Every fact of the JSON comes back from the markdown, in ranking order."""
    parsed = parse(md)
    focus, related = result["focusNote"], result["relatedNotes"]
    assert f"Related notes: {len(related)}" in parsed.head
    assert_note_read_back(parsed.focus, focus)
    path = parsed.focus.fields["Contextual path"]
    uris = [] if path.startswith("none") else [ref_uri(p) for p in split_path(path)]
    assert uris == focus["contextualPath"]
    assert [s.heading.split(". ", 1)[0] for s in parsed.related] == [
        f"### {rank}" for rank in range(1, len(related) + 1)]
    for section, note in zip(parsed.related, related, strict=True):
        relation = note["relationToFocusNote"]
        assert section.fields["Relation"].endswith(f" ({relation})")
        assert_note_read_back(section, note)


# -- the sample notebook ---------------------------------------------------------------------------
@cache
def sample_graph() -> Graph:
    graph, epoch = Graph(), dt.datetime(1970, 1, 1)
    for n in sample_notes():
        graph.add(n.id, parent_id=n.parent_id, target_id=n.target_note_id,
                  sibling_order=n.sibling_order, title=n.title, details=n.details,
                  created_at_ms=(n.created_at - epoch) // dt.timedelta(milliseconds=1),
                  deleted=n.deleted_at is not None)
    return graph


def sample_result(strategy: str, focus: str) -> dict[str, Any]:
    return doc(compute(sample_graph(), SAMPLE_FOCUS_IDS[focus], strategy, token_limit=TOKEN_LIMIT))


@pytest.mark.parametrize("focus", FOCI)
@pytest.mark.parametrize("strategy", TREE_STRATEGIES)
def test_sample_notebook_matches_the_golden_file(strategy: str, focus: str) -> None:
    rendered = graph_markdown(sample_result(strategy, focus), strategy=strategy)
    golden = GOLDEN / f"{strategy}-{focus}.md"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_bytes(rendered.encode("utf-8"))
    assert golden.exists(), f"{golden.name} is missing: run with GRAPHRAG_UPDATE_GOLDEN=1 and review it"
    assert rendered == golden.read_bytes().decode("utf-8")


@pytest.mark.parametrize("focus", FOCI)
@pytest.mark.parametrize("strategy", TREE_STRATEGIES)
def test_sample_notebook_reads_back_to_its_json(strategy: str, focus: str) -> None:
    result = sample_result(strategy, focus)
    md = graph_markdown(result, strategy=strategy)
    assert_read_back(md, result)
    assert f"Strategy: {strategy} (" in md


def test_the_goldens_cover_link_notes_truncation_and_every_strategy() -> None:
    texts = {p.name: p.read_text(encoding="utf-8") for p in GOLDEN.glob("*.md")}
    assert {f"{s}-{f}.md" for s in TREE_STRATEGIES for f in FOCI} <= set(texts)
    joined = "".join(texts.values())
    assert "- Predicate: " in joined and "- Details (truncated):" in joined
    assert "- Details: empty" in joined and "- Details: none" in joined


# -- unit cases -----------------------------------------------------------------------------------
def plain(note_id: int, title: str, relation: str = "Child", **extra: Any) -> dict[str, Any]:
    return {"uri": f"/n{note_id}", "title": title, "relationToFocusNote": relation,
            **extra, "createdAt": CREATED}


def link(note_id: int, predicate: str, subject: tuple[int, str] | None,
         target: tuple[int, str] | None, relation: str = "InboundReference",
         **extra: Any) -> dict[str, Any]:
    note: dict[str, Any] = {"uri": f"/n{note_id}"}
    if subject:
        note["subjectUriAndTitle"] = {"uri": f"/n{subject[0]}", "title": subject[1]}
    note["predicate"] = predicate
    if target:
        note["objectUriAndTitle"] = {"uri": f"/n{target[0]}", "title": target[1]}
    return {**note, "relationToFocusNote": relation, **extra, "createdAt": CREATED}


def result(focus: dict[str, Any], related: list[dict[str, Any]], *, path: tuple[int, ...] = (),
           **lists: list[str]) -> dict[str, Any]:
    tail = {"contextualPath": [f"/n{i}" for i in path], "children": [], "priorSiblings": [],
            "youngerSiblings": [], "inboundReferences": [], **lists}
    return {"focusNote": {**focus, "relationToFocusNote": "Self", **tail}, "relatedNotes": related}


def test_link_notes_show_subject_predicate_and_object() -> None:
    focus = link(5, ":a part of", (3, "Wheel"), (9, "Car"), relation="Self", details="why")
    related = [plain(9, "Car", "Object"), link(7, ":made of", (9, "Car"), None, "RemotelyRelated")]
    md = graph_markdown(result(focus, related, path=(1, 3)), strategy="wavefront")
    assert '## Focus note: "Wheel" --":a part of"--> "Car"\n' in md
    assert '- Subject: "Wheel" (/n3)\n- Predicate: ":a part of"\n- Object: "Car" (/n9, #1)\n' in md
    assert '### 2. "Car" --":made of"--> (none)\n' in md
    assert "- Object: none\n" in md
    assert "- Contextual path: /n1 -> \"Wheel\" (/n3)\n" in md  # /n1's title is nowhere in the result
    assert_read_back(md, result(focus, related, path=(1, 3)))


def test_null_empty_and_truncated_details() -> None:
    related = [plain(2, "a", details=""), plain(3, "b"),
               plain(4, "c", details="x" * 150 + "...", detailsTruncated=True)]
    data = result(plain(1, "focus", details=None), related)
    md = graph_markdown(data, strategy="layered")
    assert md.count("- Details: none\n") == 2  # the focus and b
    assert "- Details: empty\n" in md
    assert f"- Details (truncated):\n\n```markdown\n{'x' * 150}...\n```\n" in md
    assert_read_back(md, data)


@pytest.mark.parametrize(("details", "fence"), [
    ("no ticks", "```"), ("`a` and ``b``", "```"), ("```\ncode\n```", "````"),
    ("`````\n```", "``````"), ("ends with a newline\n", "```"), ("```", "````"),
])
def test_backticks_in_details_get_a_longer_fence(details: str, fence: str) -> None:
    data = result(plain(1, "focus", details=details), [plain(2, "r", details=details)])
    md = graph_markdown(data, strategy="relationship-bfs")
    assert md.count(f"\n{fence}markdown\n{details}\n{fence}\n") == 2
    assert_read_back(md, data)


def test_no_related_notes() -> None:
    data = result(plain(1, "Alone"), [])
    md = graph_markdown(data, strategy="wavefront")
    assert "Related notes: 0\n" in md
    assert md.endswith("## Related notes\n\nNone.\n")
    assert "###" not in md and "By relation:" not in md


def test_relations_are_readable_and_grouped_in_ranking_order() -> None:
    related = [plain(2, "p", "Parent"), plain(3, "y", "YoungerSibling"), plain(4, "z", "Child"),
               plain(5, "w", "YoungerSibling")]
    data = result(plain(1, "f"), related, youngerSiblings=["/n3", "/n5"], children=["/n4"])
    md = graph_markdown(data, strategy="wavefront")
    assert "- Relation: Younger sibling (YoungerSibling)\n" in md
    overview = md.split("By relation:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split(": ", 1)[1].split(" (", 1)[0] for line in overview] == ["#1", "#2, #4", "#3"]
    assert '- Younger siblings: "y" (/n3, #2), "w" (/n5, #4)\n' in md
    assert '- Children: "z" (/n4, #3)\n' in md


def test_every_relation_has_a_readable_spelling() -> None:
    related = [plain(10 + i, "n", r.value) for i, r in enumerate(Relation)]
    md = graph_markdown(result(plain(1, "f"), related), strategy="wavefront")
    readable = re.findall(r"^- Relation: (.+) \((\w+)\)$", md, re.MULTILINE)
    assert [machine for _, machine in readable] == [r.value for r in Relation]
    for spelled, machine in readable:  # sentence case, the same words
        assert spelled[0].isupper() and spelled[1:] == spelled[1:].lower()
        assert spelled.replace(" ", "").lower() == machine.lower()


def test_hostile_titles_stay_on_their_line() -> None:
    evil = "x\n## Related notes\n### 1. fake\u2028- URI: /n666\r```"
    data = result(plain(1, evil, details="d"), [plain(2, evil, details=evil)])
    md = graph_markdown(data, strategy="wavefront")
    quoted = json.dumps(evil, ensure_ascii=False).replace("\u2028", "\\u2028")
    assert [section.heading for section in parse(md).related] == [f"### 1. {quoted}"]
    # the real heading, and the related note's details (fenced) holding the same line
    assert md.split("\n").count("## Related notes") == 2
    assert "\u2028" not in md.split("```markdown")[0]
    assert_read_back(md, data)


def test_deterministic_and_only_the_strategy_line_differs() -> None:
    data = sample_result("wavefront", "hub")
    first = graph_markdown(data, strategy="wavefront")
    assert first == graph_markdown(data, strategy="wavefront")
    other = graph_markdown(data, strategy="layered")
    differing = [(a, b) for a, b in zip(first.split("\n"), other.split("\n"), strict=True) if a != b]
    assert len(differing) == 1 and differing[0][0].startswith("Strategy: wavefront (")


@pytest.mark.parametrize("bad", [{}, {"focusNote": {}}, {"focusNote": [], "relatedNotes": []},
                                 {"focusNote": {}, "relatedNotes": "x"},
                                 {"focusNote": {}, "relatedNotes": [1]}])
def test_malformed_results_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="not a GraphRAGResult"):
        graph_markdown(bad, strategy="wavefront")


def test_unknown_strategy_is_refused() -> None:
    with pytest.raises(ValueError, match="focus-context"):
        graph_markdown(result(plain(1, "f"), []), strategy="focus-context")


# -- property: any text reads back exactly ----------------------------------------------------------
texts = st.text(alphabet=st.sampled_from("ab `~\n\r\t#-*>|\u2028\u2029\u0085\"\\é中🙂"), max_size=40)
relations = st.sampled_from([r.value for r in Relation if r is not Relation.SELF])


@st.composite
def notes(draw: st.DrawFn, note_id: int) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    details = draw(st.none() | texts)
    if details is not None:
        extra["details"] = details
        if details and draw(st.booleans()):  # the service cuts long details only
            extra["detailsTruncated"] = True
    relation = draw(relations)
    if draw(st.booleans()):
        return plain(note_id, draw(texts), relation, **extra)
    ends = st.none() | st.tuples(st.integers(1, 99), texts)
    return link(note_id, draw(texts), draw(ends), draw(ends), relation, **extra)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_result_reads_back(data: st.DataObject) -> None:
    focus = data.draw(notes(1))
    related = [data.draw(notes(100 + i)) for i in range(data.draw(st.integers(0, 5)))]
    path = tuple(data.draw(st.lists(st.integers(1, 200), max_size=4)))
    value = result(focus, related, path=path)
    md = graph_markdown(value, strategy=data.draw(st.sampled_from(TREE_STRATEGIES)))
    assert_read_back(md, value)


def test_an_arrow_inside_a_title_does_not_split_the_contextual_path() -> None:
    focus = {"uri": "/n1", "predicate": " -> ", "relationToFocusNote": "Self",
             "createdAt": "2025-01-02T03:04:05.000+00:00", "contextualPath": ["/n7", "/n8"],
             "children": [], "priorSiblings": [], "youngerSiblings": [], "inboundReferences": []}
    related = [{"uri": "/n7", "title": "a -> b", "relationToFocusNote": "Parent",
                "createdAt": "2025-01-02T03:04:05.000+00:00"}]
    value = {"focusNote": focus, "relatedNotes": related}
    assert_read_back(graph_markdown(value, strategy="wavefront"), value)
