"""A focus leaves the dirty set only after its rebuild's writes (or its removal) went through.

The interleaving these tests pin down was seen as three missing snapshots of one focus after the
SIGKILL suite on a Redis Cluster with RabbitMQ: a webhook's outdating (a generation bump that marks
nothing dirty) landed after its own event task had run and a drain had taken the focus. The drain's
compare-and-set write was then refused, and the focus was let go as if written: on a restored note
nothing was left, on an edited one the old text, and nothing dirty to repair either. Each test
injects that bump at the exact step (between the rebuild's reads and its write).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from service.drain import drain_once
from service.envelope import Envelope, SnapshotKey
from service.events import outdate_shown
from service.note_event import NoteEvent
from service.rebuild import RebuildReport
from tests.usecases.conftest import SEEDS, STRATEGIES, CacheProxy, World, current, drain_all


class _BumpedBeforeTheWrite(CacheProxy):
    """The world's cache, where ``late`` (a webhook's outdating that lost the race with its own
    event task) runs right before the first write or removal of a rebuild."""

    def __init__(self, world: World, late: Callable[[], object]) -> None:
        super().__init__(world)
        self.late: Callable[[], object] | None = late

    def _land(self) -> None:
        if self.late is not None:
            late, self.late = self.late, None
            late()

    def write_many(self, envelopes: Sequence[Envelope]) -> list[bool]:
        self._land()
        return self.world.cache.write_many(envelopes)

    def delete_focus(self, note_id: int, keys: Iterable[SnapshotKey] = (), *,
                     generation: int | None = None) -> bool:
        self._land()
        return self.world.cache.delete_focus(note_id, keys, generation=generation)


def _rebuilding_with(world: World, late: Callable[[], object]) -> Callable[[Iterable[int]],
                                                                            RebuildReport]:
    proxy = _BumpedBeforeTheWrite(world, late)
    return lambda ids: world.rebuild(ids, store=proxy)


def _live_ids(world: World) -> list[int]:
    return sorted(i for i, n in world.source.notes.items() if n.deleted_at is None)


def test_a_restored_note_whose_write_an_outdating_refused_is_rebuilt(world: World) -> None:
    """The missing snapshots: note 33 deleted (its snapshots removed), then restored; the restore's
    event task runs first, a drain takes 33, and the webhook's outdating of 33 lands before the
    drain writes."""
    world.rebuild(_live_ids(world))
    world.edit(33, deleted_at=dt.datetime(2026, 1, 1))
    world.events(NoteEvent("note.deleted", 33))
    drain_all(world)
    assert world.cache.read(SnapshotKey(33, "wavefront", SEEDS[0])) is None
    world.edit(33, deleted_at=None)
    world.events(NoteEvent("note.restored", 33))  # the event task, before the webhook's outdating
    result = drain_once(world.dirty, _rebuilding_with(world, lambda: outdate_shown([33], world.cache)),
                        batch=100, settled_before_ms=world.clock(), now_ms=world.clock())
    assert result is not None and result.requeued >= 1
    assert 33 in {i for i, _ in world.dirty.take(100)}, "33 left the dirty set unwritten"
    drain_all(world)
    assert current(world, 33).note_id == 33


def test_an_edited_note_whose_write_an_outdating_refused_is_rebuilt(world: World) -> None:
    """The stale snapshots of the same interleaving: the old title stays stored, outdated, and
    nothing would ever rebuild it."""
    world.rebuild(_live_ids(world))
    world.edit(2, title="Beasts")
    affected = world.events(NoteEvent("note.updated", 2))
    drain_once(world.dirty, _rebuilding_with(world, lambda: outdate_shown([2], world.cache)),
               batch=100, settled_before_ms=world.clock(), now_ms=world.clock())
    drain_all(world)
    for focus in sorted(affected):
        assert b"Animals" not in current(world, focus).result_json, focus


def test_a_removal_the_compare_and_set_refused_is_decided_again(world: World) -> None:
    """A deleted note whose removal was refused keeps outdated snapshots: it is taken again until
    a removal goes through."""
    world.rebuild(_live_ids(world))
    world.edit(33, deleted_at=dt.datetime(2026, 1, 1))
    world.events(NoteEvent("note.deleted", 33))
    report = _rebuilding_with(world, lambda: outdate_shown([33], world.cache))([33])
    assert report.deleted == frozenset() and 33 in report.requeue
    assert world.cache.read(SnapshotKey(33, "wavefront", SEEDS[0])) is not None
    world.dirty.add(report.requeue, now_ms=world.clock())
    drain_all(world)
    assert all(world.cache.read(SnapshotKey(33, s, seed)) is None
               for s in STRATEGIES if s != "layered" for seed in SEEDS)


def test_a_full_rebuilds_refused_write_is_put_back(world: World) -> None:
    """A nightly page (no dirty entry of its own) whose write was refused reports the focus for
    the dirty set, as a raced one: the bump that refused it may never be followed by a rebuild."""
    world.rebuild(_live_ids(world))
    world.edit(2, title="Beasts")
    late: Callable[[], Any] = lambda: world.cache.bump_generations([2])  # noqa: E731
    report = _rebuilding_with(world, late)([2, 10])
    assert 2 in report.requeue and report.rejected >= 1
