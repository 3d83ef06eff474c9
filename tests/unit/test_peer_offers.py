"""The peers phase read from what a trace keeps once (graphrag.wiki.focus.peers) offers, at every
number of emitted ladder entries, what the procedure's peer queries offer: checked against the
rule written out plainly (every anchor's query run afresh, anchors sorted, claimed notes built
as a set), on the random graphs of the focus properties, in the stored form and the built one."""

from __future__ import annotations

from hypothesis import given

from graphrag.wiki.focus.peers import offer_costs, offered, offerings, peers
from graphrag.wiki.focus.trace import PeerList, Trace
from graphrag.wiki.focus.types import TraceTooSmall
from tests.unit.test_focus_properties import SETTINGS, Case, cases
from tests.wiki_support import WikiGraph, trace_of

Offers = list[tuple[int, int, int, int | None]]


def _plainly(trace: Trace, emitted: int) -> tuple[Offers, bool]:
    """The offers the rule gives, and whether an anchor's query needs rows the trace lacks."""
    ids, depths = trace.wiki.ids[:emitted], trace.wiki.depths[:emitted]
    steps = enumerate(zip(ids, depths, strict=True))
    anchors = sorted([(0, -1, trace.focus_id, trace.focus.group)]
                     + [(d, k, i, trace.notes.group(i)) for k, (i, d) in steps])
    claimed, out = {trace.focus_id, *ids}, []
    for depth, at, note_id, group in anchors:
        cap = trace.params.sample_cap(depth + 1)
        if cap <= 0 or group is None:
            continue
        members = trace.groups.get(group)
        if members is None:
            return out, True
        sample = [m for m in members.ids if m != note_id and m not in claimed][:cap]
        if len(sample) < cap and not members.complete:
            return out, True
        for m in sample:
            if m not in {o[0] for o in out}:
                out.append((m, depth + 1, at, trace.notes.cost(m)))
    return out, False


def _read(trace: Trace, emitted: int) -> tuple[Offers, bool]:
    out: Offers = []
    try:
        out.extend(offered(offerings(trace), emitted))
    except TraceTooSmall:
        return out, True
    return out, False


@SETTINGS
@given(cases())
def test_every_emitted_prefix_offers_what_the_peer_queries_offer(case: Case) -> None:
    built = case.trace()
    for trace in (built, Trace.from_bytes(built.to_bytes())):
        for emitted in range(len(trace.wiki.ids) + 1):
            want, lacking = _plainly(trace, emitted)
            assert _read(trace, emitted) == (want, lacking)
            costs = sum(c for *_, c in want if c is not None)
            assert offer_costs(offerings(trace), emitted) == (None if lacking else costs)


def test_hubs_of_one_folder_offer_its_first_members_once_each_from_the_first_hub() -> None:
    graph = WikiGraph()
    book = graph.notebook("NB", user=1)
    folder = graph.folder(book, "F")
    focus = graph.note("Focus", book)
    hubs = [graph.note(f"H{i}", book, folder) for i in range(3)]
    members = [graph.note(f"M{i}", book, folder) for i in range(4)]
    graph.link(focus, *hubs)
    trace = trace_of(graph, focus, 20_000, viewer=None, seed=None, max_depth=1)
    made = offerings(trace)
    first = trace.wiki.ids.index(hubs[0])
    offers = list(offered(made, len(trace.wiki.ids)))
    assert [o[0] for o in offers] == members[:2] and {o[2] for o in offers} == {first}
    shown = peers(made, len(trace.wiki.ids), 10**6, trace.least_cost)
    assert [s[0] for s in shown] == members[:2]
    assert peers(made, len(trace.wiki.ids), 0, trace.least_cost) == []


def test_an_anchor_whose_short_list_holds_nothing_else_raises_after_an_empty_group() -> None:
    """Two groups whose lists hold nothing but the focus: the focus's own, complete (it offers
    nothing), and a hub's, cut short. Reaching the hub's query needs rows the trace lacks, even
    though the group sampled before offered nothing either."""
    graph = WikiGraph()
    book = graph.notebook("NB", user=1)
    alone, other = graph.folder(book, "A"), graph.folder(book, "B")
    focus = graph.note("Focus", book, alone)
    hub = graph.note("Hub", book, other)
    graph.note("Peer", book, other)
    graph.link(focus, hub)
    trace = trace_of(graph, focus, 20_000, viewer=None, seed=None, max_depth=1)
    group = trace.notes.group(hub)
    assert group is not None
    trace.groups[group] = PeerList((focus,), complete=False)  # (a damaged or short list)
    assert _read(trace, len(trace.wiki.ids)) == ([], True) == _plainly(trace, len(trace.wiki.ids))
