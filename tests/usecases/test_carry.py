"""A rebuild carries loaded data into its next epoch, and a worker into its next call, only while
the edit sequence stands still, within its bounds (service.carry); the bytes never differ."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from graphrag.core.errors import DatabaseUnavailable
from service.carry import Carry
from service.decoding import decode_envelope
from service.note_event import NoteEvent
from service.rebuild import start_full_rebuild
from tests.usecases.conftest import CacheProxy, World


def loads_of(world: World, ids: list[int], carry: Carry, **options: Any) -> int:
    before = len(world.source.loads)
    world.rebuild(ids, carry=carry, **options)
    return len(world.source.loads) - before


def stored(world: World) -> dict[object, bytes]:
    return {key: value for key, (value, _) in world.cache.state.snapshots.items()}


def live(world: World) -> list[int]:
    return world.source.live_ids_after(0, 10_000)


def test_a_second_call_under_the_same_sequence_loads_nothing(world: World) -> None:
    carry = Carry()
    assert loads_of(world, live(world), carry) > 0
    assert loads_of(world, live(world), carry) == 0


def test_epochs_of_one_call_share_what_the_first_loaded(world: World) -> None:
    ids = live(world)
    once = loads_of(world, ids, Carry(), batch_size=1, epoch_size=1)
    fresh_per_epoch = sum(loads_of(world, [i], Carry()) for i in ids)
    assert once < fresh_per_epoch


def test_carried_and_fresh_rebuilds_write_the_same_bytes(world: World) -> None:
    ids = live(world)
    world.rebuild(ids, carry=Carry(), batch_size=2, epoch_size=2)
    carried = stored(world)
    world.cache.state.snapshots.clear()
    for note_id in ids:
        world.rebuild([note_id], carry=Carry())
    assert stored(world) == carried


def test_an_event_between_calls_starts_afresh_and_the_edit_shows(world: World) -> None:
    carry = Carry()
    world.rebuild([30], carry=carry)  # a child of note 10: its snapshots show 10 as the parent
    world.edit(10, title="Renamed parent")
    world.events(NoteEvent("note.updated", 10))
    assert loads_of(world, [30], carry) > 0
    assert all(b"Renamed parent" in value for value in stored(world).values())


def test_a_workspace_that_served_its_foci_is_dropped(world: World) -> None:
    carry = Carry(max_foci=3)
    world.rebuild([11, 12], carry=carry)
    assert loads_of(world, [11], carry) == 0
    assert loads_of(world, [11], carry) > 0  # it would serve a fourth focus


def test_a_workspace_older_than_its_age_is_dropped(world: World) -> None:
    carry = Carry(max_age_ms=1_000, clock_ms=world.clock)
    world.rebuild([11, 12], carry=carry)
    world.now[0] += 1_000
    assert loads_of(world, [11, 12], carry) == 0
    world.now[0] += 1
    assert loads_of(world, [11, 12], carry) > 0


def test_a_failed_epoch_drops_the_workspace(world: World) -> None:
    """After an outage (a failover, say) nothing read before it is carried on."""
    carry = Carry()
    world.rebuild([11], carry=carry)
    world.source.down = True
    with pytest.raises(DatabaseUnavailable):
        world.rebuild([12], carry=carry)
    world.source.down = False
    assert loads_of(world, [11], carry) > 0
    assert loads_of(world, [11], carry) == 0


def test_each_thread_carries_its_own_workspace(world: World) -> None:
    carry = Carry()
    world.rebuild([11], carry=carry)
    counts: list[int] = []
    other = threading.Thread(target=lambda: counts.append(loads_of(world, [11], carry)))
    other.start()
    other.join()
    assert counts[0] > 0
    assert loads_of(world, [11], carry) == 0


def test_a_carry_of_no_foci_never_carries(world: World) -> None:
    carry = Carry(max_foci=0)
    world.rebuild([11], carry=carry)
    assert loads_of(world, [11], carry) > 0


class _NightlyStartsBeforeTheWrite(CacheProxy):
    """The cache of a drain epoch that read ``seq`` (and carried data) before a full rebuild
    started: the run starts, and rebuilds ``focus`` afresh, just before the epoch's first write."""

    def __init__(self, world: World, focus: int) -> None:
        super().__init__(world)
        self.focus, self.started = focus, False

    def write_many(self, envelopes: Any) -> list[bool]:
        if not self.started:
            self.started = True
            start_full_rebuild(self.world.cache)
            self.world.rebuild([self.focus])
        return self.world.cache.write_many(envelopes)


def test_a_computation_read_before_a_full_rebuild_started_does_not_outlive_its_page(
    world: World,
) -> None:
    """The full rebuild recovers a change no event announced; a drain epoch that read before the
    run started and writes after the run's page is outdated at once and redone afresh."""
    carry = Carry()
    world.rebuild([30], carry=carry)  # the drain's process carries note 10's row
    world.edit(10, title="Renamed without an event")
    report = world.rebuild([30], carry=carry, store=_NightlyStartsBeforeTheWrite(world, 30))
    assert report.requeue == {30}
    counter = world.cache.generations([30])[30]
    written = [decode_envelope(v) for v in stored(world).values()]
    assert written and all(e is not None and e.generation < counter for e in written)  # outdated
    world.rebuild(report.requeue, carry=carry)
    assert all(b"Renamed without an event" in value for value in stored(world).values())


def test_a_removal_read_before_a_full_rebuild_started_does_not_outlive_its_page(
    world: World,
) -> None:
    """A restore no event announced: a drain epoch that found the note deleted before the run
    started, and removes its snapshots after the run's page rebuilt it, puts the focus back."""
    carry = Carry()
    world.edit(31, deleted_at=dt.datetime(2026, 1, 1))
    world.rebuild([31], carry=carry)  # the drain's process carries "31 is deleted"
    world.edit(31, deleted_at=None)
    report = world.rebuild([31], carry=carry, store=_NightlyStartsBeforeTheWrite(world, 31))
    assert report.deleted == {31} and report.requeue == {31}
    world.rebuild(report.requeue, carry=carry)
    assert {key.note_id for key in stored(world)} == {31}
