"""The peers phase of a cut, from what every budget's peers phase reads, made once per trace.

At a budget that emits the ladder's first ``e`` entries, the anchors are the focus (depth 0) and
those entries; an anchor at depth w offers the first ``sample_cap(w + 1)`` members of its group
that are not itself, the focus or claimed (the focus and the emitted entries' notes), in
(anchor depth, ladder index) order, first offer per note (graphrag.wiki.focus.cut, step 5).

What changes with ``e`` is only which anchors take part and which notes are claimed, so
:func:`offerings` reads the rest once: the anchors that can offer at all (a cap above 0, a
group), already in (depth, ladder index) order, each with its group's members less the focus
(one list per group, shared by its anchors), each member with its cost and the ladder index
from which it is claimed (the index of
its first ladder entry: it is claimed once more entries than that are emitted). A subset of an
ordered list keeps its order, so the anchors at ``e`` are the offering anchors whose ladder
index is below ``e``, in the order they are kept; a member is claimed at ``e`` exactly when
its claiming index is below ``e``. So a cut at any budget walks a few anchors' first members,
without building, sorting or hashing the emitted entries (hundreds on a large trace).

An anchor whose member list the trace lacks, or holds too short for its cap after the claimed
notes are left out, makes the cut raise TraceTooSmall when the phase reaches it, as the
procedure's peer query would need rows the trace does not hold; never before (an earlier end of
the phase needs no more).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from graphrag.wiki.focus.trace import Trace
from graphrag.wiki.focus.types import TraceTooSmall

__all__ = ["Offer", "Offerings", "ShownNote", "offer_costs", "offered", "offerings", "peers"]

#: (note id, depth, the index of the anchor whose path it shows: -1 the focus, else a ladder step)
ShownNote = tuple[int, int, int]
#: an offer: (note id, depth, its anchor's path index, its cost; None when the trace cannot show it)
Offer = tuple[int, int, int, int | None]
#: a member of an anchor's group: (note id, its cost or None, the ladder index it is claimed from)
_Member = tuple[int, int | None, int]


class _Anchor(NamedTuple):
    """An anchor whose peer query can offer notes at some budget."""

    depth: int
    #: -1 the focus, else its ladder index: it takes part once more entries than that are emitted
    path_at: int
    #: its group (None: its note is one the trace does not hold)
    group: str | None
    cap: int
    #: its group's members less the focus, shared by the anchors of the group (None: the trace
    #: holds none)
    members: tuple[_Member, ...] | None
    #: whether ``members`` is all of the group's
    complete: bool
    #: what the trace lacks when ``members`` is None or too short
    lacking: str


class Offerings(NamedTuple):
    """What every budget's peers phase reads (module docstring)."""

    anchors: tuple[_Anchor, ...]


def offerings(trace: Trace) -> Offerings:
    """The offering anchors of ``trace`` in (depth, ladder index) order (module docstring)."""
    ladder, params, notes = trace.wiki, trace.params, trace.notes
    caps = {d: params.sample_cap(d + 1) for d in {0, *ladder.depths}}
    claimed_from: dict[int, int] = {}
    for k, note_id in enumerate(ladder.ids):
        claimed_from.setdefault(note_id, k)
    found = [(0, -1, trace.focus_id)]
    found += [(d, k, i) for k, (i, d) in enumerate(zip(ladder.ids, ladder.depths, strict=True))
              if caps[d] > 0]
    found.sort(key=lambda anchor: (anchor[0], anchor[1]))
    groups: dict[str, tuple[_Member, ...] | None] = {}
    anchors = []
    for depth, path_at, note_id in found:
        held = note_id == trace.focus_id or notes.cost(note_id) is not None
        group = trace.focus.group if path_at < 0 else notes.group(note_id) if held else None
        if not held:
            anchors.append(_Anchor(depth, path_at, None, caps[depth], None, False,
                                   f"the trace holds no note {note_id}"))
        elif group is not None:
            if group not in groups:
                groups[group] = _members(trace, group, claimed_from)
            anchors.append(_anchor(trace, depth, path_at, caps[depth], group, groups[group]))
    return Offerings(tuple(anchors))


def _members(trace: Trace, group: str, claimed_from: dict[int, int]) -> tuple[_Member, ...] | None:
    """The group's members the trace holds, less the focus, each with its cost and the ladder
    index it is claimed from (None: the trace holds none)."""
    members = trace.groups.get(group)
    if members is None:
        return None
    never, cost_of, focus = len(trace.wiki.ids), trace.notes.cost, trace.focus_id
    return tuple((m, cost_of(m), claimed_from.get(m, never)) for m in members.ids if m != focus)


def _anchor(trace: Trace, depth: int, path_at: int, cap: int, group: str,
            members: tuple[_Member, ...] | None) -> _Anchor:
    if members is None:
        return _Anchor(depth, path_at, group, cap, None, False,
                       f"the trace holds no members of group {group}")
    return _Anchor(depth, path_at, group, cap, members, trace.groups[group].complete,
                   f"the member list of group {group} is too short")


def offered(made: Offerings, emitted: int) -> Iterator[Offer]:
    """The offers at a budget emitting ``emitted`` ladder entries, in order, first per note;
    raises TraceTooSmall on reaching an anchor whose members the trace lacks. An anchor of a
    group sampled before at a cap as large offers nothing new: its own note is claimed (it is an
    emitted entry), so its sample is a prefix of that one, which was long enough."""
    seen, sampled = set[int](), dict[str, int]()
    for anchor in made.anchors:
        group = anchor.group
        if anchor.path_at >= emitted or (group is not None
                                         and sampled.get(group, 0) >= anchor.cap > 0):
            continue
        for note_id, cost in _sample(anchor, emitted):
            if note_id not in seen:
                seen.add(note_id)
                yield note_id, anchor.depth + 1, anchor.path_at, cost
        if group is not None:  # (an anchor without one raised in its sample)
            sampled[group] = max(anchor.cap, sampled.get(group, 0))


def _sample(anchor: _Anchor, emitted: int) -> Sequence[tuple[int, int | None]]:
    """The anchor's peer query: its group's first ``cap`` members not claimed at ``emitted``
    (its own note is: it is an emitted entry, or the focus)."""
    if anchor.members is None:
        raise TraceTooSmall(anchor.lacking)
    picked = []
    for note_id, cost, claimed in anchor.members:
        if claimed >= emitted:
            picked.append((note_id, cost))
            if len(picked) == anchor.cap:
                return picked
    if not anchor.complete:
        raise TraceTooSmall(anchor.lacking)
    return picked


def peers(made: Offerings, emitted: int, budget: int, least: int) -> list[ShownNote]:
    """The peers shown for a peer budget of ``budget`` tokens: offers are taken in order while
    they fit (one that costs more than what remains, or cannot be shown, is skipped: a later
    cheaper one may still get in); the phase ends once what remains is below ``least`` (the
    trace's least cost) or nothing remains."""
    shown: list[ShownNote] = []
    remaining = budget
    if remaining <= 0:
        return shown
    for note_id, depth, path_at, cost in offered(made, emitted):
        if remaining < least or remaining <= 0:
            break
        if cost is not None and cost <= remaining:
            remaining -= cost
            shown.append((note_id, depth, path_at))
    return shown


def offer_costs(made: Offerings, emitted: int) -> int | None:
    """What every offer at ``emitted`` that can be shown costs, summed; None when the trace lacks
    an anchor's members (it does not hold every offer)."""
    try:
        return sum(cost for _, _, _, cost in offered(made, emitted) if cost is not None)
    except TraceTooSmall:
        return None
