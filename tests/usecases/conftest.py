"""The fast suite's world: the use cases over in-memory ports, no service needed.

:class:`World` is an in-memory note source (the tree model) plus an in-memory cache, dirty set and
coordination on one state with a settable clock, and the live-compute service over them. Every use
case runs here in milliseconds; the contract suites (tests/contracts) prove the in-memory ports
behave as the SQL and Redis adapters do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from graphrag import CharsCounter, StrategyParams
from service.carry import Carry
from service.context import ContextService
from service.decoding import decode_envelope
from service.drain import drain_until
from service.envelope import Envelope, SnapshotKey
from service.events import record_events, sibling_radius
from service.note_event import NoteEvent
from service.ports import SnapshotCache
from service.rebuild import RebuildReport, rebuild
from storage.database import epoch_ms
from storage.memory import MemoryCoordination, MemoryDirtySet, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_source import MemoryTree
from storage.records import TreeNote
from tests.reliability.checks import DbNote, content_problems
from tests.storage.graphs import hand_graph
from tests.support import NOW_MS

STRATEGIES = ("wavefront", "layered", "relationship-bfs")
SEEDS = (0, 7)
MAX_LIMIT = 2_000
LAYERED_LIMITS = (900, 2_000)


@dataclass
class World:
    source: MemoryTree
    state: MemoryState
    cache: MemoryCache
    dirty: MemoryDirtySet
    coordination: MemoryCoordination
    service: ContextService
    now: list[int] = field(default_factory=lambda: [NOW_MS])
    strategies: tuple[str, ...] = STRATEGIES

    def clock(self) -> int:
        return self.now[0]

    def rebuild(self, ids: Iterable[int], service: ContextService | None = None,
                carry: Carry | None = None, store: SnapshotCache | None = None,
                **options: Any) -> RebuildReport:
        """``options``: rebuild's ``batch_size``, ``epoch_size``."""
        return rebuild(service or self.service, store or self.cache, ids, strategies=self.strategies,
                       seeds=SEEDS, max_token_limit=MAX_LIMIT, layered_limits=LAYERED_LIMITS,
                       now_ms=self.clock(), carry=carry, **options)

    def edit(self, note_id: int, **changes: Any) -> None:
        """Change a note "in Doughnut's database" (no event yet)."""
        self.source.put(dataclasses.replace(self.source.notes[note_id], **changes))

    def events(self, *events: NoteEvent) -> set[int]:
        return record_events(list(events), self.source, self.cache, self.dirty,
                             sibling_radius=sibling_radius(self.strategies), now_ms=self.clock())


def drain_all(world: World) -> None:
    """Drain until nothing is dirty, everything settled first (the clock moves on a second)."""
    world.now[0] += 1_000
    drain_until(world.dirty, world.rebuild, batch=100, debounce_ms=0, budget_s=60,
                clock_ms=world.clock)
    assert world.dirty.size() == 0


def current(world: World, focus: int) -> Envelope:
    """The wavefront snapshot of ``focus`` (first seed), which must exist and not be outdated."""
    raw, counter = world.cache.read_current(SnapshotKey(focus, "wavefront", SEEDS[0]))
    env = decode_envelope(raw) if raw is not None else None
    assert env is not None, f"note {focus} has no snapshot"
    assert env.generation >= counter, f"the snapshot of note {focus} is outdated"
    return env


class CacheProxy:
    """The world's cache for a test that changes what one or two of its calls do (an edit landing
    between a computation and its write, Redis not answering); every other call goes through."""

    def __init__(self, world: World) -> None:
        self.world = world

    def __getattr__(self, name: str) -> Any:
        return getattr(self.world.cache, name)


def new_world(records: Iterable[TreeNote]) -> World:
    """A world over ``records`` with an empty cache, dirty set and coordination."""
    state = MemoryState()
    source = MemoryTree(records)
    w = World(source, state, MemoryCache(state, soft_ttl_s=3_600, hard_ttl_s=7_200),
              MemoryDirtySet(state), MemoryCoordination(state),
              ContextService(source, CharsCounter(), StrategyParams()))
    state.clock_ms = w.clock
    return w


def stale_snapshots(world: World, only: Collection[int] | None = None) -> list[str]:
    """Every snapshot a live note (of ``only``, when given) should have that is missing or
    outdated, and every content problem of the stored ones against the notes as they are now (the
    reliability suites' check: what a snapshot shows is exact, which notes it picked is not)."""
    notes = {n.id: _db_note(n) for n in world.source.notes.values()}
    problems = []
    for note_id in sorted(i for i, n in notes.items()
                          if not n.deleted and (only is None or i in only)):
        for key in _keys(world, note_id):
            raw, counter = world.cache.read_current(key)
            env = decode_envelope(raw) if raw is not None else None
            if env is None or env.generation < counter:
                problems.append(f"{key}: {'missing' if env is None else 'outdated'}")
            else:
                problems += [f"{key}: {p}" for p in content_problems(notes, note_id, env.result_json)]
    return problems


def _keys(world: World, note_id: int) -> list[SnapshotKey]:
    return [SnapshotKey(note_id, s, seed, limit) for s in world.strategies for seed in SEEDS
            for limit in (LAYERED_LIMITS if s == "layered" else (None,))]


def _db_note(note: TreeNote) -> DbNote:
    return DbNote(note.id, note.parent_id, note.target_note_id, note.sibling_order, note.title,
                  note.details, epoch_ms(note.created_at), note.deleted_at is not None)


@pytest.fixture
def world() -> World:
    return new_world(hand_graph().records())
