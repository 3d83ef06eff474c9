"""Draining the dirty set: a focus leaves only after its rebuild is written (fast)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

import pytest

from graphrag.core.errors import CacheUnavailable
from service.drain import drain_once, drain_session, drain_until, requeue
from service.ports import Lease
from service.rebuild import RebuildReport
from tests.usecases.conftest import World


def reporting(**fields: object) -> RebuildReport:
    base: dict[str, object] = {"count": 1, "errors": {}, "seconds": 0.0}
    return RebuildReport(**{**base, **fields})  # type: ignore[arg-type]


def test_only_settled_foci_are_taken(world: World) -> None:
    world.dirty.add([1, 2], now_ms=1_000)
    world.dirty.add([3], now_ms=2_000)
    seen: list[list[int]] = []

    def rebuild(ids: Iterable[int]) -> RebuildReport:
        seen.append(list(ids))
        return reporting(count=len(seen[-1]))

    result = drain_once(world.dirty, rebuild, batch=10, settled_before_ms=1_500, now_ms=2_500)
    assert result is not None and result.taken == 2 and seen == [[1, 2]]
    assert [i for i, _ in world.dirty.take(10)] == [3]


def test_a_focus_dirtied_again_during_its_rebuild_stays(world: World) -> None:
    world.dirty.add([5], now_ms=1_000)

    def rebuild(ids: Iterable[int]) -> RebuildReport:
        world.dirty.add([5], now_ms=1_100)  # an edit while it is being rebuilt
        return reporting()

    drain_once(world.dirty, rebuild, batch=10, settled_before_ms=2_000, now_ms=2_000)
    assert world.dirty.take(10) == [(5, 1_100.0)]


def test_raced_foci_go_back_and_errors_are_let_go(world: World) -> None:
    world.dirty.add([7, 8, 9], now_ms=1_000)
    result = drain_once(world.dirty, lambda ids: reporting(requeue=frozenset({8}), errors={9: "bad"}),
                        batch=10, settled_before_ms=2_000, now_ms=3_000)
    assert result is not None and (result.requeued, result.errors) == (1, 1)
    assert world.dirty.take(10) == [(8, 3_000.0)]


def test_a_drain_rebuilds_until_the_set_is_empty(world: World) -> None:
    ids = world.source.live_ids_after(0, 10_000)
    world.dirty.add(ids, now_ms=0)
    written = drain_until(world.dirty, world.rebuild, batch=25, debounce_ms=0, budget_s=60,
                          clock_ms=world.clock)
    assert world.dirty.size() == 0
    assert written == world.cache.state.snapshots.__len__()


def test_requeue_adds_only_what_raced(world: World) -> None:
    assert requeue(world.dirty, [], now_ms=1) == 0
    assert requeue(world.dirty, [4, 4, 5], now_ms=1) == 2


def recording(seen: list[list[int]]) -> Callable[[Iterable[int]], RebuildReport]:
    def rebuild(ids: Iterable[int]) -> RebuildReport:
        seen.append(list(ids))
        return reporting(count=len(seen[-1]))
    return rebuild


def session(world: World, rebuild: Callable[[Iterable[int]], RebuildReport], *, batch: int,
            budget_s: float = 60) -> int:
    return drain_session(world.dirty, rebuild, batch=batch, debounce_ms=0, budget_s=budget_s,
                         clock_ms=world.clock, lease_ms=10_000)


def test_a_session_serves_an_urgent_edit_before_a_hubs_wide_set(world: World) -> None:
    world.dirty.add(range(1_000, 1_400), now_ms=1)
    seen: list[list[int]] = []

    def rebuild(ids: Iterable[int]) -> RebuildReport:
        if not seen:  # an edit arrives while the first wide batch is rebuilt
            world.dirty.add([7], now_ms=2, lane="urgent")
        return recording(seen)(ids)

    session(world, rebuild, batch=50)
    assert seen[1] == [7]  # the very next batch, of its own, ahead of the hub's older foci
    assert sorted(i for batch in seen for i in batch) == [7, *range(1_000, 1_400)]


def test_urgent_foci_of_every_shard_make_one_batch_of_their_own(world: World) -> None:
    world.dirty.add(range(100, 140), now_ms=1)
    world.dirty.add([4, 5, 6, 7], now_ms=2, lane="urgent")  # one in each of the 4 shards
    seen: list[list[int]] = []
    session(world, recording(seen), batch=100)
    assert sorted(seen[0]) == [4, 5, 6, 7]
    assert sorted(i for batch in seen[1:] for i in batch) == list(range(100, 140))
    assert [len(batch) for batch in seen[1:]] == [25, 15]  # wide: a quarter of a batch at a time


def test_a_small_edits_near_foci_follow_its_urgent_ones_ahead_of_an_older_wide_set(
        world: World) -> None:
    world.dirty.add(range(100, 140), now_ms=1)  # a hub's wide set
    world.dirty.add(range(10, 30), now_ms=2, lane="near")
    world.dirty.add([4, 5], now_ms=2, lane="urgent")
    seen: list[list[int]] = []
    session(world, recording(seen), batch=100)
    assert [sorted(batch) for batch in seen[:2]] == [[4, 5], list(range(10, 30))]
    assert [len(batch) for batch in seen[2:]] == [25, 15]  # near: a whole batch; wide: a quarter


def test_while_one_worker_rebuilds_an_edits_urgent_foci_another_takes_its_wide_ones(
    world: World,
) -> None:
    """An edit's wide foci in the shards of its urgent ones need not wait for the urgent batch."""
    world.dirty.add([1, 5], now_ms=1)
    world.dirty.add([9], now_ms=1, lane="urgent")  # all three in shard 1
    other = world.dirty.take(1, shard=1, lanes=("urgent",), lease_ms=60_000)
    assert other == [(9, 1.0)]  # another worker is rebuilding focus 9
    seen: list[list[int]] = []
    session(world, recording(seen), batch=100)
    assert seen == [[1, 5]] and world.dirty.size() == 1
    world.dirty.release(other)  # it failed: focus 9 is anyone's again at once
    session(world, recording(seen), batch=100)
    assert seen[1:] == [[9]] and world.dirty.size() == 0


def test_two_workers_drain_one_lane_side_by_side(world: World) -> None:
    """A hub's remnant leased by one worker does not keep a later edit's foci of the same lanes
    from another."""
    world.dirty.add([1, 5, 9], now_ms=1)
    world.dirty.add([13, 17], now_ms=2)  # shard 1 too: a later edit
    remnant = world.dirty.take(2, shard=1, lanes=("wide",), lease_ms=60_000)
    assert [i for i, _ in remnant] == [1, 5]
    seen: list[list[int]] = []
    session(world, recording(seen), batch=100)
    assert seen == [[9, 13, 17]]
    assert world.dirty.done(remnant) == 2 and world.dirty.size() == 0


def test_a_session_skips_what_another_worker_leased_until_the_lease_expires(world: World) -> None:
    world.dirty.add(range(40), now_ms=1)
    dead = world.dirty.take(100, shard=1, lease_ms=5_000)  # its worker was killed
    seen: list[list[int]] = []
    session(world, recording(seen), batch=100)
    assert {i % 4 for batch in seen for i in batch} == {0, 2, 3}
    assert world.dirty.size() == len(dead) == 10
    world.now[0] += 5_000
    session(world, recording(seen), batch=100)
    assert world.dirty.size() == 0 and sorted(seen[-1]) == sorted(i for i, _ in dead)


def test_a_session_fills_a_batch_from_several_shards(world: World) -> None:
    world.dirty.add(range(8), now_ms=1)  # two foci in each of the 4 shards
    seen: list[list[int]] = []
    assert session(world, recording(seen), batch=100) == 8
    assert [sorted(batch) for batch in seen] == [list(range(8))]  # one batch, not one per shard
    world.dirty.add(range(8), now_ms=2)
    seen.clear()
    assert session(world, recording(seen), batch=12) == 8
    assert [len(batch) for batch in seen] == [3, 3, 2]  # wide: a quarter of a batch at a time
    world.dirty.add(range(8), now_ms=3, lane="urgent")
    seen.clear()
    assert session(world, recording(seen), batch=5) == 8
    assert [len(batch) for batch in seen] == [5, 3]


def test_a_focus_dirtied_again_during_its_batch_is_rebuilt_again_by_the_next(world: World) -> None:
    """``done`` lets go of the lease even of a focus it keeps: its new edit is not held back."""
    world.dirty.add([5], now_ms=1)
    seen: list[list[int]] = []

    def rebuild(ids: Iterable[int]) -> RebuildReport:
        if not seen:
            world.dirty.add([5], now_ms=2)
        return recording(seen)(ids)

    session(world, rebuild, batch=10)
    assert seen == [[5], [5]] and world.dirty.size() == 0


def test_a_raced_focus_is_free_for_the_next_batch(world: World) -> None:
    world.dirty.add([7, 8], now_ms=1)
    seen: list[list[int]] = []

    def rebuild(ids: Iterable[int]) -> RebuildReport:
        seen.append(list(ids))
        return reporting(count=len(seen[-1]), requeue=frozenset({8} if len(seen) == 1 else ()))

    session(world, rebuild, batch=10)
    assert [sorted(batch) for batch in seen] == [[7, 8], [8]] and world.dirty.size() == 0


def test_a_batch_keeps_its_leases_alive_while_it_runs(world: World) -> None:
    world.dirty.add([1, 5], now_ms=1)
    held: list[Lease] = []

    def hold(lease: Lease) -> contextlib.nullcontext[None]:
        held.append(lease)  # the worker renews it from a thread (tasks.jobs.kept)
        return contextlib.nullcontext()

    def rebuild(ids: Iterable[int]) -> RebuildReport:
        world.now[0] += 9_000
        assert held[-1].renew()
        world.now[0] += 9_000  # 18 s after the take: alive through the renewal only
        assert world.dirty.take(10, shard=1) == []
        return reporting(count=2)

    assert drain_session(world.dirty, rebuild, batch=10, debounce_ms=0, budget_s=60,
                         clock_ms=world.clock, lease_ms=10_000, hold=hold) == 2
    assert world.dirty.size() == 0 and not held[-1].renew()  # done let them go


def test_a_failed_batch_lets_go_of_its_leases(world: World) -> None:
    world.dirty.add([1, 2, 3], now_ms=1)

    def rebuild(ids: Iterable[int]) -> RebuildReport:
        raise CacheUnavailable("redis went away")

    with pytest.raises(CacheUnavailable):
        session(world, rebuild, batch=10)
    assert sorted(i for shard in range(4) for i, _ in world.dirty.take(10, shard=shard)) == [1, 2, 3]


def test_a_failure_to_let_go_never_hides_the_batchs_own_error(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    world.dirty.add([1], now_ms=1)

    def refused(taken: object) -> int:
        raise RuntimeError("BUSY")  # a Redis reply no adapter translates

    def rebuild(ids: Iterable[int]) -> RebuildReport:
        raise CacheUnavailable("redis went away")

    monkeypatch.setattr(world.dirty, "release", refused)
    with pytest.raises(CacheUnavailable):
        session(world, rebuild, batch=10)


def test_an_urgent_edit_of_a_focus_in_a_wide_batch_is_taken_at_once(world: World) -> None:
    world.dirty.add([1, 5], now_ms=1)
    hub_batch = world.dirty.take(10, shard=1, lease_ms=60_000)
    world.dirty.add([5], now_ms=2, lane="urgent")  # the edit's own note, while the batch runs
    seen: list[list[int]] = []
    session(world, recording(seen), batch=10)
    assert seen == [[5]]
    assert world.dirty.done(hub_batch) == 1 and world.dirty.size() == 0


def test_a_session_ends_when_nothing_is_settled(world: World) -> None:
    world.dirty.add([1], now_ms=world.clock())
    seen: list[list[int]] = []
    drain_session(world.dirty, recording(seen), batch=10, debounce_ms=50, budget_s=60,
                  clock_ms=world.clock, lease_ms=1_000)
    assert seen == [] and world.dirty.size() == 1
