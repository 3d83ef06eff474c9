"""The bytes of a FocusContextResult: Jackson 3's JSON and Doughnut's markdown renderer, and the
approximate token budget they are cut with."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from graphrag.wiki.approx_tokens import (
    cut_and_measure,
    estimate_tokens,
    java_utf8_length,
    truncate_tokens,
    utf16_length,
)
from graphrag.wiki.focus.render import (
    iso_instant,
    json_string,
    markdown_json,
    render_markdown,
    render_related_notes,
    result_json,
    safe_fence,
)
from graphrag.wiki.focus.types import FocusContextResult, FocusNoteOut, RelatedNoteOut
from tests.wiki_reference import java_bytes, java_estimate, java_truncate, units
from tests.wiki_support import OWNER, H, WikiGraph, result_of

MAY_4 = int(datetime(2026, 5, 4, 10, 15, 17, tzinfo=UTC).timestamp() * 1000)


def focus(
    notebook: str | None = "NB", title: str = "T", content: str | None = "body", truncated: bool = False
) -> FocusNoteOut:
    return FocusNoteOut(notebook, title, "", 0, (), (), (), MAY_4, content, truncated)


def related(
    title: str, path: tuple[str, ...], depth: int = 1, content: str | None = "x", truncated: bool = False
) -> RelatedNoteOut:
    return RelatedNoteOut("NB", title, "", depth, path, MAY_4, content, truncated)


# -- JSON strings ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('say "hi"', b'"say \\"hi\\""'),
        ("back\\slash", b'"back\\\\slash"'),
        ("\b\t\n\f\r", b'"\\b\\t\\n\\f\\r"'),
        ("\x00\x01\x0b\x1f", b'"\\u0000\\u0001\\u000B\\u001F"'),
        ("a/b\x7f", b'"a/b\x7f"'),
        ("é中", '"é中"'.encode()),
        ("😀", b'"\xf0\x9f\x98\x80"'),
        ("cut\ud83d", b'"cut\\uD83D"'),
        ("\ude00low", b'"\\uDE00low"'),
        ("\ud83d\ude00", b'"\xf0\x9f\x98\x80"'),  # a pair held as two code points is one character
        ("\\u0041", b'"\\\\u0041"'),
        ("\\u001a\x1a", b'"\\\\u001a\\u001A"'),  # text that looks like an escape stays as it is
        ("\u2028", '"\u2028"'.encode()),
    ],
)
def test_strings_are_escaped_as_jackson_does(text: str, expected: bytes) -> None:
    assert json_string(text) == expected


@given(st.text(st.characters(codec="utf-8") | st.just("\ud83d")))
def test_json_strings_parse_back_to_the_text(text: str) -> None:
    assert json.loads(json_string(text)) == text


def _jackson(char: str) -> str:
    """One character as Jackson writes it (after surrogate pairs are joined)."""
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
    if char in short:
        return short[char]
    return f"\\u{ord(char):04X}" if ord(char) < 0x20 or 0xD800 <= ord(char) < 0xE000 else char


@given(st.text(st.sampled_from(["\\", "u", "0", "1", "a", "F", "\x1a", "\x00", '"', "\n", "é", "\ud83d",
                                "\ude00", "\U0001F369", "\u2028", "\x7f"])))
def test_json_strings_are_written_character_by_character_as_jackson_does(text: str) -> None:
    joined = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    expected = '"' + "".join(map(_jackson, joined)) + '"'
    assert json_string(text) == expected.encode("utf-8", "surrogatepass")


def test_dates_are_utc_instants_with_milliseconds_and_z() -> None:
    assert iso_instant(MAY_4) == "2026-05-04T10:15:17.000Z"
    assert iso_instant(MAY_4 + 123) == "2026-05-04T10:15:17.123Z"
    assert iso_instant(0) == "1970-01-01T00:00:00.000Z"
    assert iso_instant(-1) == "1969-12-31T23:59:59.999Z"


# -- JSON documents -------------------------------------------------------------------------------
def test_properties_come_in_declaration_order_and_nulls_are_omitted() -> None:
    full = FocusContextResult(
        FocusNoteOut("NB", "T", "", 0, ("[[NB: A]]",), (), (), MAY_4, "", False),
        (related("R", ("[[T]]", "[[NB: R]]"), content=None),),
    )
    document = orjson.loads(result_json(full))
    assert list(document) == ["focusNote", "relatedNotes"]
    assert list(document["focusNote"]) == [
        "notebook",
        "title",
        "folderPath",
        "depth",
        "outgoingLinks",
        "inboundReferences",
        "sampleSiblings",
        "createdAt",
        "content",
        "contentTruncated",
    ]
    assert list(document["relatedNotes"][0]) == [
        "notebook",
        "title",
        "folderPath",
        "depth",
        "retrievalPath",
        "createdAt",
        "contentTruncated",
    ]
    bare = orjson.loads(result_json(FocusContextResult(focus(notebook=None, content=None), ())))
    assert "notebook" not in bare["focusNote"] and "content" not in bare["focusNote"]
    assert bare["focusNote"]["folderPath"] == "" and bare["focusNote"]["contentTruncated"] is False


def test_the_document_is_compact() -> None:
    body = result_json(FocusContextResult(focus(), ()))
    assert body == orjson.dumps(orjson.loads(body))
    assert body.startswith(b'{"focusNote":{"notebook":"NB","title":"T","folderPath":"","depth":0,')
    assert body.endswith(b'"content":"body","contentTruncated":false},"relatedNotes":[]}')


def test_the_markdown_endpoint_wraps_the_text() -> None:
    assert markdown_json('a "b"\n') == b'{"markdown":"a \\"b\\"\\n"}'


# -- markdown -------------------------------------------------------------------------------------
def test_the_fence_is_longer_than_any_backtick_run() -> None:
    assert safe_fence("no backticks") == "```"
    assert safe_fence("some ```java\ncode\n```") == "````"
    assert safe_fence("has ```` fences") == "`````"
    assert safe_fence(None) == safe_fence("") == "```"


def test_the_whole_document_layout() -> None:
    result = FocusContextResult(
        FocusNoteOut("NB", "Focus", "A / B", 0, (), (), (), MAY_4, "focus body", True),
        (
            related(
                "Far",
                ("[[Focus]]", "[[NB: Mid]]", "[[NB: Far]]"),
                depth=2,
                content="far\n",
                truncated=True,
            ),
        ),
    )
    assert render_markdown(result, 2) == (
        "<focus_context>\n"
        "Purpose: Context around the focus note for AI use.\n"
        "Max depth: 2\n"
        "\n<focus_note>\nTitle: Focus\nNotebook: NB\nFolder: A / B\nDepth: 0\nTruncated: true\n"
        "\nContent:\n\n```doughnut-note-md\nfocus body\n```\n</focus_note>\n"
        "\n---\n"
        "\n<retrieved_note>\nTitle: Far\nNotebook: NB\nDepth: 2\n"
        "Path: [[Focus]] -> [[NB: Mid]] -> [[NB: Far]]\nTruncated: true\n"
        "\nContent:\n\n```doughnut-note-md\nfar\n```\n</retrieved_note>\n"
        "</focus_context>\n"
    )


def test_a_focus_note_alone_has_no_retrieved_block() -> None:
    output = render_markdown(FocusContextResult(focus("My Notebook", "My Title", "Some content"), ()), 1)
    assert output.startswith("<focus_context>\n") and output.endswith("</focus_context>\n")
    assert "Max depth: 1\n" in output and "Notebook: My Notebook\n" in output
    assert "<retrieved_note>" not in output and "Truncated:" not in output
    assert "# Focus Context" not in output


@pytest.mark.parametrize("blank", ["", " \n\t", "\u3000\u2028", None])
def test_a_blank_body_has_no_content_section(blank: str | None) -> None:
    output = render_markdown(FocusContextResult(focus(content=blank), ()), 1)
    assert "\nContent:\n" not in output and "doughnut-note-md" not in output


def test_a_no_break_space_body_is_not_blank_in_java() -> None:
    output = render_markdown(FocusContextResult(focus(content="\xa0"), ()), 1)
    assert "```doughnut-note-md\n\xa0\n```\n" in output


def test_a_missing_notebook_and_an_empty_path_are_left_out() -> None:
    peer = RelatedNoteOut(None, "P", "", 1, (), MAY_4, "x", False)
    output = render_markdown(FocusContextResult(focus(notebook=None), (peer,)), 1)
    assert "Notebook:" not in output and "Path:" not in output


def test_a_folder_peer_shows_the_path_to_its_anchor() -> None:
    output = render_markdown(
        FocusContextResult(focus(title="Anchor"), (related("Peer", ("[[Anchor]]",)),)), 1
    )
    assert "Title: Peer\nNotebook: NB\nDepth: 1\nPath: [[Anchor]]\n" in output


def test_related_notes_blocks() -> None:
    assert render_related_notes([], 1) == ""
    output = render_related_notes([related("First", ()), related("Second", ())], 3)
    purpose = "Purpose: Notes related to the session items, for tutor context.\n"
    assert output.startswith(f"<related_notes>\n{purpose}Max depth: 3\n")
    assert output.endswith("</related_notes>\n") and "---" not in output
    assert (
        output.index("Title: First") < output.index("</retrieved_note>") < output.index("Title: Second")
    )


# -- approximate tokens ---------------------------------------------------------------------------
def test_estimates() -> None:
    assert estimate_tokens(None) == estimate_tokens("") == 0
    assert estimate_tokens("x") == 1
    assert estimate_tokens("x" * 15) == 4 and estimate_tokens("x" * 16) == 5
    assert java_utf8_length("a\ud83d") == 2 and java_utf8_length("😀") == 4


def test_truncation_counts_bytes_not_characters() -> None:
    ascii_text, cjk = "hello world " * 10, "你好世界 " * 10
    assert len(truncate_tokens(cjk, 10) or "") < len(truncate_tokens(ascii_text, 10) or "")
    assert truncate_tokens("a" * 10_000, 1500) == "a" * 5625


def test_a_cut_inside_a_pair_keeps_the_high_surrogate_as_java_does() -> None:
    cut = truncate_tokens("ab😀cd", 1)  # 3 bytes: "ab" plus the high half, counted as "?"
    assert cut == "ab\ud83d"
    assert utf16_length(cut or "") == 3 and estimate_tokens(cut) == 1
    assert result_json(FocusContextResult(focus(content=cut), ())).count(b'"ab\\uD83D"') == 1


texts = st.text(st.characters(codec="utf-8") | st.sampled_from(["😀", "é", "中", "\ud83d"]), max_size=60)


@given(texts, st.integers(-2, 40))
def test_truncation_is_javas_binary_search(text: str, tokens: int) -> None:
    assert truncate_tokens(text, tokens) == java_truncate(text, tokens)
    assert estimate_tokens(text) == java_estimate(text)


@given(texts, st.integers(-2, 40))
@example("\ud83d", -2)  # (a lone surrogate first and a limit below 0: no byte to back off from)
@example("ab😀\ud83dcd", 1)
def test_a_cut_is_measured_as_java_measures_it(text: str, tokens: int) -> None:
    # (one encoding finds a text without surrogates and measures it; one with a lone surrogate is
    # cut by its bytes up to that surrogate, then code point by code point)
    cut, size = cut_and_measure(text, tokens)
    assert cut == (truncate_tokens(text, tokens) or "") == (java_truncate(text, tokens) or "")
    assert size == java_utf8_length(cut) == java_bytes(units(cut))
    assert java_utf8_length(text) == java_bytes(units(text))


@given(texts, st.integers(0, 40), st.integers(0, 40))
def test_cutting_twice_is_cutting_once_at_the_smaller_size(text: str, a: int, b: int) -> None:
    small, large = min(a, b), max(a, b)
    assert truncate_tokens(truncate_tokens(text, large), small) == truncate_tokens(text, small)


@given(st.integers(-(2**31), 2**31 - 1))
def test_the_wiki_share_is_javas_floor_of_three_quarters(related_tokens: int) -> None:
    from graphrag.wiki.focus.types import FocusContextParams

    assert FocusContextParams().wiki_budget(related_tokens) == math.floor(related_tokens * 0.75)


# -- the worked example ---------------------------------------------------------------------------
def test_the_worked_example_gives_the_documented_json() -> None:
    graph = WikiGraph()
    cs = graph.notebook("CS", user=OWNER)
    paradigms = graph.folder(cs, "Paradigms")
    minute = 60_000
    base = 1_785_571_200_000  # 2026-08-01T08:00:00Z
    functional = graph.note(
        "Functional",
        cs,
        paradigms,
        H + "Pure functions and immutable data. See [[Lambda Calculus]].",
        created_at_ms=base,
    )
    graph.note(
        "Object Oriented",
        cs,
        paradigms,
        H + "Objects bundle state and behaviour.",
        created_at_ms=base + 3 * minute,
    )
    calculus = graph.note(
        "Lambda Calculus", cs, None, H + "Church's formal system.", created_at_ms=base + minute
    )
    haskell = graph.note(
        "Haskell", cs, None, H + "A lazy [[Functional]] language.", created_at_ms=base + 2 * minute
    )
    graph.link(functional, calculus)
    graph.link(haskell, functional)
    expected = {
        "focusNote": {
            "notebook": "CS",
            "title": "Functional",
            "folderPath": "Paradigms",
            "depth": 0,
            "outgoingLinks": ["[[CS: Lambda Calculus]]"],
            "inboundReferences": ["[[CS: Haskell]]"],
            "sampleSiblings": ["[[CS: Object Oriented]]"],
            "createdAt": "2026-08-01T08:00:00.000Z",
            "content": "---\ntype: Note\n---\n"
            "Pure functions and immutable data. See [[Lambda Calculus]].",
            "contentTruncated": False,
        },
        "relatedNotes": [
            {
                "notebook": "CS",
                "title": "Lambda Calculus",
                "folderPath": "",
                "depth": 1,
                "retrievalPath": ["[[Functional]]", "[[CS: Lambda Calculus]]"],
                "createdAt": "2026-08-01T08:01:00.000Z",
                "content": "---\ntype: Note\n---\nChurch's formal system.",
                "contentTruncated": False,
            },
            {
                "notebook": "CS",
                "title": "Haskell",
                "folderPath": "",
                "depth": 1,
                "retrievalPath": ["[[Functional]]", "[[CS: Haskell]]"],
                "createdAt": "2026-08-01T08:02:00.000Z",
                "content": "---\ntype: Note\n---\nA lazy [[Functional]] language.",
                "contentTruncated": False,
            },
            {
                "notebook": "CS",
                "title": "Object Oriented",
                "folderPath": "Paradigms",
                "depth": 1,
                "retrievalPath": ["[[Functional]]"],
                "createdAt": "2026-08-01T08:03:00.000Z",
                "content": "---\ntype: Note\n---\nObjects bundle state and behaviour.",
                "contentTruncated": False,
            },
        ],
    }
    assert result_json(result_of(graph, functional)) == orjson.dumps(expected)


_TEXTS = st.lists(st.sampled_from(["a", "\\", "u00", "1f", "\x1f", "\x00", '"', "\n", "é", "\ud83d",
                                   "\ude00", "\U0001F369"]), max_size=8).map("".join)


def _member_by_member(result: FocusContextResult) -> bytes:
    """The body written one member at a time with :func:`json_string` (what Jackson writes)."""
    def obj(pairs: list[tuple[str, object]]) -> bytes:
        def value(v: object) -> bytes:
            if isinstance(v, str):
                return json_string(v)
            if isinstance(v, bool | int):
                return json.dumps(v).encode()
            return b"[" + b",".join(json_string(x) for x in v) + b"]"  # type: ignore[attr-defined]
        return b"{" + b",".join(f'"{k}":'.encode() + value(v) for k, v in pairs if v is not None) + b"}"
    f = result.focus_note
    head = obj([("notebook", f.notebook), ("title", f.title), ("folderPath", f.folder_path),
                ("depth", f.depth), ("outgoingLinks", f.outgoing_links),
                ("inboundReferences", f.inbound_references), ("sampleSiblings", f.sample_siblings),
                ("createdAt", "2026-05-04T10:15:17.000Z"), ("content", f.content),
                ("contentTruncated", f.content_truncated)])
    notes = [obj([("notebook", n.notebook), ("title", n.title), ("folderPath", n.folder_path),
                  ("depth", n.depth), ("retrievalPath", n.retrieval_path),
                  ("createdAt", "2026-05-04T10:15:17.000Z"), ("content", n.content),
                  ("contentTruncated", n.content_truncated)]) for n in result.related_notes]
    return b'{"focusNote":' + head + b',"relatedNotes":[' + b",".join(notes) + b"]}"


@given(_TEXTS, st.none() | _TEXTS, st.lists(st.tuples(_TEXTS, st.none() | _TEXTS, _TEXTS), max_size=4))
def test_a_body_is_written_in_one_call_or_member_by_member_to_the_same_bytes(
    title: str, content: str | None, notes: list[tuple[str, str | None, str]]
) -> None:
    head = FocusNoteOut(None, title, "A / B", 0, (title,), (), (content or "",), MAY_4, content, True)
    related_notes = tuple(RelatedNoteOut("NB", t, "", 2, (p, t), MAY_4, c, False) for t, c, p in notes)
    result = FocusContextResult(head, related_notes)
    assert result_json(result) == _member_by_member(result)
