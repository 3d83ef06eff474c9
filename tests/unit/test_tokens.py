"""Token counters and budgets (docs/doughnut.md, docs/algorithms.md)."""

from __future__ import annotations

import json
from fractions import Fraction
from math import ceil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphrag import (
    CharsCounter,
    ConfigurationError,
    InvalidParameter,
    MemoCounter,
    OnePerNoteCounter,
    Request,
    StrategyParams,
    TiktokenCounter,
    config_hash,
)
from graphrag.tree.model import Need, Relation
from graphrag.tree.outcome import Costing
from graphrag.tree.render import bare_note, dumps
from graphrag.tree.view import GraphView
from storage.encodings import load_cl100k
from tests.support import Graph, compute
from tests.unit.helpers import doc

STRATEGIES = ("wavefront", "layered")


def compact(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def chars_estimate(n_bytes: int) -> int:
    return ceil(Fraction(n_bytes) / Fraction(15, 4))  # ceil(bytes / 3.75), exactly


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 7, 8, 15, 16, 374, 375, 376, 1000, 12345])
def test_chars_counter_is_ceil_of_bytes_over_3_75(n: int) -> None:
    assert CharsCounter().count(b"x" * n) == chars_estimate(n)


def test_chars_counter_counts_utf8_bytes_not_characters() -> None:
    text = "中文字".encode()  # 9 bytes, 3 characters
    assert CharsCounter().count(text) == 3  # ceil(9 / 3.75) = 3
    assert CharsCounter().count("😀😀".encode()) == 3  # 8 bytes -> ceil(2.13) = 3


@pytest.mark.parametrize("payload", [b"", b"{}", b"x" * 10_000])
def test_one_per_note_counter_is_always_one(payload: bytes) -> None:
    assert OnePerNoteCounter().count(payload) == 1


def hub() -> Graph:
    """A focus (10) with a parent chain, siblings, children and inbound references."""
    g = Graph()
    g.add(1, title="root")
    g.add(2, parent_id=1, title="parent", details="p" * 40)
    for sib in (11, 12, 13):
        g.add(sib, parent_id=2, title=f"sibling {sib}")
    g.add(10, parent_id=2, title="focus", details="focus details " * 5, sibling_order=12_500)
    for kid in (20, 21, 22, 23):
        g.add(kid, parent_id=10, title=f"child {kid}", details="c" * (kid - 15))
    g.add(30, title="other")
    g.add(31, parent_id=30, target_id=10, title=":mentions")
    g.add(32, parent_id=30, target_id=10, title=":cites")
    return g


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_focus_cost_is_its_focus_json_with_path_and_empty_lists(strategy: str) -> None:
    out = compute(hub(), 10, strategy, token_limit=100_000)
    focus = doc(out)["focusNote"]
    assert focus["contextualPath"] == ["/n1", "/n2"]
    assert focus["children"], "the test needs non-empty lists to show they are not costed"
    for key in ("children", "priorSiblings", "youngerSiblings", "inboundReferences"):
        focus[key] = []
    assert out.focus.tokens == chars_estimate(len(compact(focus)))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_related_note_cost_is_chars_of_exactly_its_emitted_json(strategy: str) -> None:
    out = compute(hub(), 10, strategy, token_limit=100_000)
    emitted = doc(out)["relatedNotes"]
    assert len(emitted) == len(out.picks) > 5
    for pick, note in zip(out.picks, emitted, strict=True):
        assert pick.json == compact(note)
        assert pick.tokens == chars_estimate(len(pick.json))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_token_limit_includes_the_focus(strategy: str) -> None:
    g = hub()
    full = compute(g, 10, strategy, token_limit=100_000)
    focus_tokens = full.focus.tokens
    # below or at the focus's own cost there is no room for any related note
    for limit in (0, 1, focus_tokens - 1, focus_tokens):
        assert compute(g, 10, strategy, token_limit=limit).picks == ()
    first = full.picks[0].tokens
    assert [p.note_id for p in compute(g, 10, strategy, token_limit=focus_tokens + first).picks] == [
        full.picks[0].note_id
    ]


def test_wavefront_budget_boundary_is_exact() -> None:
    g = hub()
    big = 100_000
    full = compute(g, 10, "wavefront", token_limit=big)
    assert len(full.picks) >= 6
    for k in range(1, len(full.picks) + 1):
        limit = full.focus.tokens + sum(p.tokens for p in full.picks[:k])
        exact = compute(g, 10, "wavefront", token_limit=limit, traversal_token_limit=big)
        assert exact.picks == full.picks[:k]
        short = compute(g, 10, "wavefront", token_limit=limit - 1, traversal_token_limit=big)
        assert short.picks == full.picks[: k - 1]


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("limit", [0, 1, 2, 3, 5, 8])
def test_one_per_note_limit_n_gives_n_minus_one_related_notes(strategy: str, limit: int) -> None:
    g = hub()
    available = len(compute(g, 10, strategy, token_limit=1000, counter=OnePerNoteCounter()).picks)
    assert available >= 8
    out = compute(g, 10, strategy, token_limit=limit, counter=OnePerNoteCounter())
    assert out.focus.tokens == 1
    assert len(out.picks) == max(limit - 1, 0)
    assert all(p.tokens == 1 for p in out.picks)


def test_tiktoken_counter_counts_encode_ordinary_of_the_json_text() -> None:
    seen: list[str] = []

    def encode_ordinary(text: str) -> list[int]:
        seen.append(text)
        return list(range(len(text.split(","))))

    counter = TiktokenCounter(encode_ordinary)
    payload = '{"title":"日本","x":"<|endoftext|>"}'.encode()
    assert counter.count(payload) == 2
    assert seen == [payload.decode()]
    assert counter.name == "tiktoken"


class Tally:
    """A counter that counts its calls: one token per comma-separated part."""

    name = "tally"

    def __init__(self) -> None:
        self.calls: list[bytes] = []

    def count(self, note_json: bytes) -> int:
        self.calls.append(note_json)
        return len(note_json.split(b","))


def test_memo_counter_asks_its_counter_once_per_distinct_bytes() -> None:
    inner = Tally()
    memo = MemoCounter(inner, max_entries=10)
    texts = [b"a,b", b"a,b,c", "日本,x".encode(), b"a,b", b"", b"a,b,c"]
    assert [memo.count(t) for t in texts] == [Tally().count(t) for t in texts]
    assert inner.calls == [b"a,b", b"a,b,c", "日本,x".encode(), b""]
    assert memo.entries() == 4


def test_memo_counter_forgets_the_least_recently_used_beyond_its_size() -> None:
    inner = Tally()
    memo = MemoCounter(inner, max_entries=2)
    for text in (b"1", b"2", b"1", b"3", b"1", b"2"):
        memo.count(text)
    assert inner.calls == [b"1", b"2", b"3", b"2"]  # b"2" was the least recently used when b"3" came
    assert memo.entries() == 2


def test_memo_counter_keeps_the_counters_name_so_snapshots_keep_their_config_hash() -> None:
    memo = MemoCounter(TiktokenCounter(lambda text: [0]), max_entries=5)
    assert memo.name == "tiktoken"
    params = StrategyParams()
    assert config_hash("wavefront", params, memo.name) == config_hash("wavefront", params, "tiktoken")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_memo_too_small_for_the_context_gives_the_same_context(strategy: str) -> None:
    memo = MemoCounter(Tally(), max_entries=3)
    plain = compute(hub(), 10, strategy, token_limit=60, counter=Tally())
    assert len(plain.picks) > 3
    assert compute(hub(), 10, strategy, token_limit=60, counter=memo).to_json() == plain.to_json()
    assert memo.entries() == 3


def test_a_memo_of_no_entries_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="at least 1 entry, not 0"):
        MemoCounter(Tally(), max_entries=0)


@pytest.mark.parametrize("limit", [-1, 2**31])
def test_token_limit_out_of_range_is_rejected(limit: int) -> None:
    with pytest.raises(InvalidParameter):
        Request(1, 0, limit, 0)


# -- a note's JSON costed in parts -----------------------------------------------------------------
@pytest.fixture(scope="module")
def cl100k() -> TiktokenCounter:
    return TiktokenCounter(load_cl100k().encode_ordinary)


TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60) | st.sampled_from(
    ["", "'s", "'ll ", " \n", "123", '"relationToFocusNote":"Self"', "\\u00e9", "a\"b", "😀x"])


@settings(max_examples=150, deadline=None)
@given(title=TEXTS, details=st.none() | TEXTS, parent=st.none() | TEXTS, target=st.none() | TEXTS,
       created_ms=st.integers(0, 4_102_444_800_000))
def test_a_note_costed_in_parts_costs_what_its_whole_json_costs(
    cl100k: TiktokenCounter, title: str, details: str | None, parent: str | None,
    target: str | None, created_ms: int,
) -> None:
    """The tree's costing renders a note once around its relation and adds the parts' tiktoken
    counts (graphrag.core.tokens.adds_up_around_words): the bytes and the count of every relation
    are those of the whole JSON."""
    g = Graph()
    g.add(1, title=parent or "p")
    g.add(2, title=target or "t")
    g.add(3, parent_id=1 if parent is not None else None, title=title, details=details,
          created_at_ms=created_ms, target_id=2 if target is not None else None)
    view = GraphView()
    every = frozenset({1, 2, 3})
    g.load(view, Need(every, every, every, every, every))
    costing = Costing(view, cl100k, 150)
    row = view.row(3)
    assert row is not None
    for relation in Relation:
        pick = costing.pick(3, relation)
        assert pick is not None
        assert pick.json == dumps(bare_note(row, relation, truncate_bytes=150))
        assert pick.tokens == cl100k.count(pick.json)
