"""Recording the events of either graph model: resolve, outdate, mark dirty.

Each model resolves its own events (service.tree_events for the 2025 note tree, service.wiki_events
for today's wiki model: which foci an edit affects, stamping the edited notes or facts before their
reverse index is read); this module picks the resolver by the source's model, bumps the generations
of every affected focus and marks them dirty, and holds what the webhook and change capture do
before they enqueue (:func:`outdate_shown`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from graphrag import get_strategy
from service import tree_events, wiki_events
from service.drain import settles_in_s
from service.note_event import NoteEvent
from service.ports import DirtyQueue, Lane, NoteSource, SnapshotCache

__all__ = ["SMALL_EDIT_FOCI", "edit_lanes", "outdate_shown", "record_events", "record_settling",
           "sibling_radius"]

Resolver = Callable[[Sequence[NoteEvent], NoteSource, SnapshotCache, int], tuple[set[int], set[int]]]
#: Per graph model: (events, source, cache, sibling radius) -> (urgent foci, affected foci).
RESOLVERS: dict[str, Resolver] = {
    "tree": lambda events, notes, cache, radius: tree_events.affected_foci(
        events, notes, cache, sibling_radius=radius),
    "wiki": lambda events, notes, cache, _radius: wiki_events.affected_foci(events, notes, cache),
}


def sibling_radius(strategies: Iterable[str]) -> int:
    """How far an edit's sibling effect reaches for the snapshots kept: the widest strategy's."""
    return max((get_strategy(s).sibling_radius for s in strategies), default=0)


#: An edit affecting at most this many foci is *small*: those not close to its notes wait in the near
#: lane, ahead of every large edit's wide set (docs/architecture.md, "Draining").
SMALL_EDIT_FOCI = 32


def record_events(events: Sequence[NoteEvent], notes: NoteSource, snapshots: SnapshotCache,
                  dirty: DirtyQueue, *, sibling_radius: int, now_ms: int) -> set[int]:
    """Resolve, bump generations and mark dirty, each focus in its lane (:func:`edit_lanes`), the
    least urgent first; returns the affected ids."""
    close, affected = RESOLVERS[notes.model](events, notes, snapshots, sibling_radius)
    snapshots.bump_generations(affected)
    for lane, foci in reversed(edit_lanes(close, affected).items()):
        dirty.add(foci, now_ms=now_ms, lane=lane)
    return affected


def edit_lanes(close: set[int], affected: set[int]) -> dict[Lane, set[int]]:
    """The lanes of an edit's foci, most urgent first: *urgent* those a resolver found close to the
    edited notes; the rest *near* when they are at most :data:`SMALL_EDIT_FOCI` in all (a hub's
    wide set dirtied before never keeps them waiting), else *wide*."""
    rest = affected - close
    small = len(affected) <= SMALL_EDIT_FOCI
    return {"urgent": close, "near": rest if small else set(), "wide": set() if small else rest}


def record_settling(events: Sequence[NoteEvent], notes: NoteSource, snapshots: SnapshotCache,
                    dirty: DirtyQueue, *, sibling_radius: int, debounce_ms: int,
                    clock_ms: Callable[[], int]) -> tuple[set[int], float]:
    """:func:`record_events` now, and the seconds until its foci are settled, when their drain is
    due: the debounce counts from their score (service.drain.settles_in_s), so the time spent
    resolving them is not waited a second time. What the event task and the webhook both do."""
    dirtied_ms = clock_ms()
    affected = record_events(events, notes, snapshots, dirty, sibling_radius=sibling_radius,
                             now_ms=dirtied_ms)
    return affected, settles_in_s(dirtied_ms, debounce_ms=debounce_ms, now_ms=clock_ms())


def outdate_shown(note_ids: Iterable[int], snapshots: SnapshotCache) -> set[int]:
    """Bump the generation of the notes and of every focus whose stored snapshots show one of them
    (``dep:{X}``, on today's Doughnut ``dep:{note:X}``), with the cache alone; returns those foci.

    What a webhook does before it answers: the reader computes a snapshot older than its generation
    instead of serving it, so from the answer on no read shows an edited note's old text, however
    long the event waits for a worker. The notes are stamped first, as the event task does: a rebuild
    that read one of them before the edit but registers in ``dep:`` only after this read finds the
    stamp after its write and bumps its own focus (service.rebuild). The event task still resolves,
    bumps and marks dirty the whole affected set (tree neighbours, moves, deletions need the
    database)."""
    ids = set(note_ids)
    facts: list[int | str] = [*ids, *(f"note:{i}" for i in ids)]
    snapshots.stamp_touched(facts)
    foci = ids | snapshots.dependents(facts)
    snapshots.bump_generations(foci)
    return foci
