"""The wiki phase's prefix (graphrag.wiki.focus.cut._wiki_prefix), summed once per trace and
bisected, emits what Doughnut's loop emits: entries while the remaining budget is positive, the
one that overshoots kept, and a ladder too short for the budget refused unless it is complete.
Costs are drawn with zeros, missing ones (None: a note the trace cannot show) and negative ones
(a damaged trace, whose sums are walked instead)."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from graphrag.wiki.focus.cut import _wiki_prefix
from graphrag.wiki.focus.types import TraceTooSmall


def doughnuts_loop(costs: list[int | None], budget: int, complete: bool) -> int | str:
    remaining = budget
    for emitted, cost in enumerate(costs):
        if remaining <= 0:
            return emitted
        remaining -= cost or 0
    return "too small" if remaining > 0 and not complete else len(costs)


def prefix(trace: SimpleNamespace, budget: int) -> int | str:
    try:
        return _wiki_prefix(trace, budget)  # type: ignore[arg-type]
    except TraceTooSmall:
        return "too small"


@given(costs=st.lists(st.one_of(st.none(), st.integers(-40, 40)), max_size=30),
       budgets=st.lists(st.integers(-5, 600), min_size=1, max_size=6), complete=st.booleans())
def test_the_bisected_prefix_is_doughnuts_loop(costs: list[int | None], budgets: list[int],
                                               complete: bool) -> None:
    ids = list(range(len(costs)))
    trace = SimpleNamespace(wiki=SimpleNamespace(ids=ids), wiki_complete=complete, derived={},
                            notes=SimpleNamespace(cost=lambda i: costs[i]))
    for budget in budgets:  # (one trace: the sums are kept from the first budget on)
        assert prefix(trace, budget) == doughnuts_loop(costs, budget, complete)
