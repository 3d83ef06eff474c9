"""The wavefront is deterministic: one seed gives identical bytes, and the answer for a smaller
tokenLimit is a prefix slice of the answer for the maximum (graphrag.slice_result)."""

from __future__ import annotations

import orjson
import pytest

import graphrag
from tests.unit.wavefront_graphs import dense, family, monster, wf


# -- determinism and prefix slicing -------------------------------------------------------------------
def test_same_seed_gives_identical_bytes() -> None:
    for g, focus in ((family(), 5), (monster(), 1), (monster(), 1100), (dense(), 1)):
        for seed in (0, 7):
            assert wf(g, focus, seed=seed).to_json() == wf(g, focus, seed=seed).to_json()


@pytest.mark.parametrize(("make", "focus"), [(family, 5), (monster, 1), (monster, 1100), (dense, 1)])
def test_smaller_token_limit_is_a_slice_of_the_maximum(make: object, focus: int) -> None:
    g = make()  # type: ignore[operator]
    top = 2500
    full = wf(g, focus, token_limit=top)
    assert full.picks
    parsed = orjson.loads(full.to_json())
    limits = {0, 1, full.focus.tokens, full.focus.tokens + 1, 100, 300, 700, 1200, top - 1, top}
    running = full.focus.tokens
    for p in full.picks[:8]:
        running += p.tokens
        limits |= {running - 1, running, running + 1}
    for small in sorted(limits):
        if small > top:
            continue
        expected = graphrag.slice_result(parsed, full.focus.tokens, full.related_tokens, small)
        live = wf(g, focus, token_limit=small, traversal_token_limit=top)
        assert orjson.loads(live.to_json()) == expected, small
