"""Rendering of Doughnut's GraphRAGResult JSON (docs/doughnut.md)."""

from __future__ import annotations

import datetime as dt
import json

import orjson
import pytest

from graphrag import Ref, Row
from graphrag.tree.model import Relation
from graphrag.tree.render import bare_note, created_at, dumps, focus_note, truncate_details
from tests.support import Graph, compute
from tests.unit.helpers import doc

BARE_ORDER = [
    "uri",
    "subjectUriAndTitle",
    "predicate",
    "title",
    "objectUriAndTitle",
    "parentUriAndTitle",
    "relationToFocusNote",
    "details",
    "detailsTruncated",
    "createdAt",
]
FOCUS_TAIL = ["contextualPath", "children", "priorSiblings", "youngerSiblings", "inboundReferences"]


def ms(*args: int) -> int:
    """Epoch milliseconds of a UTC wall-clock time, computed independently of graphrag."""
    year, month, day, hour, minute, second = args[:6]
    moment = dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)
    millis = args[6] if len(args) > 6 else 0
    return int(moment.timestamp()) * 1000 + millis


def row(
    note_id: int = 7,
    title: str = "T",
    details: str | None = None,
    *,
    link: bool = False,
    parent: Ref | None = None,
    target: Ref | None = None,
    created: int = 0,
) -> Row:
    return Row(note_id, title, details, created, link, parent, target)


def assert_in_contract_order(keys: list[str], order: list[str]) -> None:
    positions = [order.index(k) for k in keys]  # ValueError if an unknown key is emitted
    assert positions == sorted(positions), keys


# -- omitted nulls, property order ------------------------------------------------------------------
def test_plain_root_note_omits_every_null_property() -> None:
    out = bare_note(row(details=None), Relation.CHILD, truncate_bytes=150)
    assert list(out) == ["uri", "title", "relationToFocusNote", "createdAt"]
    assert out["uri"] == "/n7"
    assert out["relationToFocusNote"] == "Child"
    assert b"null" not in dumps(out)


def test_plain_note_with_parent_has_title_and_parent_in_order() -> None:
    out = bare_note(
        row(details="d", parent=Ref(3, "Parent title")), Relation.PARENT, truncate_bytes=150
    )
    assert list(out) == [
        "uri",
        "title",
        "parentUriAndTitle",
        "relationToFocusNote",
        "details",
        "createdAt",
    ]
    assert out["parentUriAndTitle"] == {"uri": "/n3", "title": "Parent title"}
    assert list(out["parentUriAndTitle"]) == ["uri", "title"]
    assert "subjectUriAndTitle" not in out and "predicate" not in out
    assert "objectUriAndTitle" not in out


def test_link_note_uses_subject_predicate_object_not_title_or_parent() -> None:
    out = bare_note(
        row(
            title=":a part of",
            details="why",
            link=True,
            parent=Ref(3, "Wheel"),
            target=Ref(9, "Car"),
        ),
        Relation.INBOUND_REFERENCE,
        truncate_bytes=150,
    )
    assert list(out) == [
        "uri",
        "subjectUriAndTitle",
        "predicate",
        "objectUriAndTitle",
        "relationToFocusNote",
        "details",
        "createdAt",
    ]
    assert out["subjectUriAndTitle"] == {"uri": "/n3", "title": "Wheel"}
    assert out["predicate"] == ":a part of"
    assert out["objectUriAndTitle"] == {"uri": "/n9", "title": "Car"}
    assert "title" not in out and "parentUriAndTitle" not in out


def test_link_note_without_parent_or_live_target_omits_them_but_keeps_predicate() -> None:
    out = bare_note(row(title=":x", link=True), Relation.OBJECT, truncate_bytes=150)
    assert list(out) == ["uri", "predicate", "relationToFocusNote", "createdAt"]


def test_empty_details_are_not_null_and_are_kept() -> None:
    out = bare_note(row(details=""), Relation.CHILD, truncate_bytes=150)
    assert out["details"] == ""
    assert "detailsTruncated" not in out


def test_focus_note_appends_the_five_lists_after_bare_fields() -> None:
    out = focus_note(
        row(details="x", parent=Ref(2, "p")),
        [1, 2],
        children=[10],
        prior_siblings=[],
        younger_siblings=[12],
        inbound_references=[],
    )
    keys = list(out)
    assert keys[-5:] == FOCUS_TAIL
    assert_in_contract_order(keys[:-5], BARE_ORDER)
    assert out["relationToFocusNote"] == "Self"
    assert out["contextualPath"] == ["/n1", "/n2"]
    assert out["children"] == ["/n10"]
    assert out["priorSiblings"] == [] and out["inboundReferences"] == []  # empty lists kept
    assert out["youngerSiblings"] == ["/n12"]


def test_end_to_end_json_has_exact_property_orders_and_no_nulls() -> None:
    g = Graph()
    g.add(1, title="root")
    g.add(2, parent_id=1, title="focus", details=None)
    g.add(3, parent_id=2, title="kid", details="k")
    g.add(4, parent_id=3, target_id=2, title=":refers to")  # link under a child, pointing at focus
    out = compute(g, 2, "wavefront")
    raw = out.to_json()
    assert b"null" not in raw
    parsed = doc(out)
    assert list(parsed) == ["focusNote", "relatedNotes"]
    focus = parsed["focusNote"]
    assert "details" not in focus
    assert list(focus)[-5:] == FOCUS_TAIL
    assert focus["contextualPath"] == ["/n1"]
    for note in parsed["relatedNotes"]:
        assert_in_contract_order(list(note), BARE_ORDER)
    link = next(n for n in parsed["relatedNotes"] if n["uri"] == "/n4")
    assert link["predicate"] == ":refers to"
    assert link["subjectUriAndTitle"] == {"uri": "/n3", "title": "kid"}
    assert link["objectUriAndTitle"] == {"uri": "/n2", "title": "focus"}
    assert "title" not in link


def test_deleted_parent_and_target_are_not_rendered_as_references() -> None:
    g = Graph()
    g.add(1, title="gone parent", deleted=True)
    g.add(5, title="gone target", deleted=True)
    g.add(2, parent_id=1, target_id=5, title=":rel")
    out = doc(compute(g, 2, "wavefront"))
    focus = out["focusNote"]
    assert "subjectUriAndTitle" not in focus and "objectUriAndTitle" not in focus
    assert focus["predicate"] == ":rel"
    assert focus["contextualPath"] == []


# -- details truncation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("details", "expected"),
    [
        ("a" * 200, "a" * 150 + "..."),
        ("a" * 151, "a" * 150 + "..."),
        # 1 + 3 x 60 = 181 bytes; byte 150 falls inside the 50th CJK character, which is dropped whole
        ("a" + "中" * 60, "a" + "中" * 49 + "..."),
        # 4-byte emoji: 37 x 4 = 148 <= 150 < 152
        ("😀" * 40, "😀" * 37 + "..."),
        # 2-byte characters: 75 x 2 = 150 exactly fits
        ("é" * 80, "é" * 75 + "..."),
    ],
)
def test_long_details_are_cut_to_at_most_150_bytes_plus_ellipsis(details: str, expected: str) -> None:
    cut, truncated = truncate_details(details, 150)
    assert truncated is True
    assert cut == expected
    prefix = cut[:-3].encode()
    assert len(prefix) <= 150
    assert details.encode().startswith(prefix)
    # the longest such prefix: adding the next character would exceed 150 bytes
    assert len(details[: len(cut) - 2].encode()) > 150


@pytest.mark.parametrize("details", ["a" * 150, "中" * 50, "é" * 75, "😀" * 37 + "ab", "", "x"])
def test_details_of_at_most_150_bytes_are_unchanged(details: str) -> None:
    assert len(details.encode()) <= 150
    assert truncate_details(details, 150) == (details, False)
    out = bare_note(row(details=details), Relation.CHILD, truncate_bytes=150)
    assert out["details"] == details
    assert "detailsTruncated" not in out


def test_related_note_details_truncated_flag_and_focus_details_whole() -> None:
    long_text = "长" * 100 + "tail"  # 304 bytes
    g = Graph()
    g.add(1, title="root", details=long_text)
    g.add(2, parent_id=1, title="focus", details=long_text)
    g.add(3, parent_id=2, title="child", details="short")
    out = doc(compute(g, 2, "wavefront"))
    assert out["focusNote"]["details"] == long_text
    assert "detailsTruncated" not in out["focusNote"]
    by_uri = {n["uri"]: n for n in out["relatedNotes"]}
    assert by_uri["/n1"]["details"] == "长" * 50 + "..."
    assert by_uri["/n1"]["detailsTruncated"] is True
    assert by_uri["/n3"]["details"] == "short"
    assert "detailsTruncated" not in by_uri["/n3"]


def test_layered_related_details_are_truncated_too() -> None:
    g = Graph()
    g.add(1, title="root", details="z" * 151)
    g.add(2, parent_id=1, title="focus", details="z" * 151)
    out = doc(compute(g, 2, "layered"))
    assert out["focusNote"]["details"] == "z" * 151
    assert out["relatedNotes"][0]["details"] == "z" * 150 + "..."
    assert out["relatedNotes"][0]["detailsTruncated"] is True


# -- createdAt ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("moment", "text"),
    [
        ((2025, 12, 3, 10, 15, 17), "2025-12-03T10:15:17.000+00:00"),
        ((2025, 12, 3, 10, 15, 17, 7), "2025-12-03T10:15:17.007+00:00"),
        ((2025, 12, 3, 10, 15, 17, 123), "2025-12-03T10:15:17.123+00:00"),
        ((2024, 2, 29, 23, 59, 59, 999), "2024-02-29T23:59:59.999+00:00"),
        ((1970, 1, 1, 0, 0, 0), "1970-01-01T00:00:00.000+00:00"),
        ((2001, 9, 9, 1, 46, 40, 50), "2001-09-09T01:46:40.050+00:00"),
        ((1969, 7, 20, 20, 17, 40, 5), "1969-07-20T20:17:40.005+00:00"),
    ],
)
def test_created_at_is_utc_with_milliseconds(moment: tuple[int, ...], text: str) -> None:
    assert created_at(ms(*moment)) == text


def test_created_at_reaches_the_json() -> None:
    g = Graph()
    g.add(1, title="root", created_at_ms=ms(2025, 12, 3, 10, 15, 17, 42))
    g.add(2, parent_id=1, title="focus", created_at_ms=ms(2020, 1, 2, 3, 4, 5))
    out = doc(compute(g, 2, "wavefront"))
    assert out["focusNote"]["createdAt"] == "2020-01-02T03:04:05.000+00:00"
    assert out["relatedNotes"][0]["createdAt"] == "2025-12-03T10:15:17.042+00:00"


# -- compact JSON ---------------------------------------------------------------------------------------
def test_dumps_is_compact_and_does_not_escape_non_ascii() -> None:
    value = bare_note(
        row(title="日本語 ✓ \"q\"", details="émoji 😀\nline", parent=Ref(1, "père")),
        Relation.PARENT,
        truncate_bytes=150,
    )
    data = dumps(value)
    assert data == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    assert "日本語".encode() in data and "😀".encode() in data
    assert b"\\u" not in data
    assert b", " not in data and b": " not in data


def test_result_bytes_are_compact_json_of_the_same_value() -> None:
    g = Graph()
    g.add(1, title="ルート", details="détails")
    g.add(2, parent_id=1, title="焦点")
    g.add(3, parent_id=2, title="子")
    raw = compute(g, 2, "wavefront").to_json()
    assert raw == json.dumps(orjson.loads(raw), ensure_ascii=False, separators=(",", ":")).encode()
    assert "焦点".encode() in raw
