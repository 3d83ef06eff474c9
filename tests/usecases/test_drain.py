"""Draining the dirty set: a focus leaves only after its rebuild is written (fast)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from service.drain import drain_once, drain_session, drain_until, requeue
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
    return drain_session(world.dirty, world.coordination, rebuild, batch=batch, debounce_ms=0,
                         budget_s=budget_s, clock_ms=world.clock, lock_ttl_ms=10_000)


def test_a_session_serves_an_urgent_edit_before_a_hubs_wide_set(world: World) -> None:
    world.dirty.add(range(1_000, 1_400), now_ms=1)
    seen: list[list[int]] = []

    def rebuild(ids: Iterable[int]) -> RebuildReport:
        if not seen:  # an edit arrives while the first wide batch is rebuilt
            world.dirty.add([7], now_ms=2, urgent=True)
        return recording(seen)(ids)

    session(world, rebuild, batch=50)
    assert seen[1] == [7]  # the very next batch, of its own, ahead of the hub's older foci
    assert sorted(i for batch in seen for i in batch) == [7, *range(1_000, 1_400)]


def test_urgent_foci_of_every_shard_make_one_batch_of_their_own(world: World) -> None:
    world.dirty.add(range(100, 140), now_ms=1)
    world.dirty.add([4, 5, 6, 7], now_ms=2, urgent=True)  # one in each of the 4 shards
    seen: list[list[int]] = []
    session(world, recording(seen), batch=100)
    assert sorted(seen[0]) == [4, 5, 6, 7]
    assert sorted(seen[1]) == list(range(100, 140)) and len(seen) == 2


def test_while_one_worker_rebuilds_an_edits_urgent_foci_another_takes_its_wide_ones(
    world: World,
) -> None:
    """The lanes are locked apart: an edit's wide foci in the shards of its urgent ones need not
    wait for the urgent batch."""
    world.dirty.add([1, 5], now_ms=1)
    world.dirty.add([9], now_ms=1, urgent=True)  # all three in shard 1
    urgent_batch = world.coordination.lock("drain:1:urgent", ttl_ms=60_000)
    assert urgent_batch.acquire()  # another worker is rebuilding focus 9
    seen: list[list[int]] = []
    session(world, recording(seen), batch=100)
    assert seen == [[1, 5]] and [i for i, _ in world.dirty.take(100)] == [9]
    urgent_batch.release()
    session(world, recording(seen), batch=100)
    assert seen[1:] == [[9]] and world.dirty.size() == 0


def test_a_lane_that_gave_nothing_is_not_held_during_the_batch(world: World) -> None:
    world.dirty.add([4], now_ms=1, urgent=True)
    world.dirty.add([1], now_ms=1)
    lanes: list[bool] = []

    def rebuild(ids: Iterable[int]) -> RebuildReport:  # during the urgent batch of focus 4
        if not lanes:
            lanes.extend(world.coordination.lock(name, ttl_ms=1).acquire()
                         for name in ("drain:0:urgent", "drain:1", "drain:1:urgent"))
        return reporting(count=len(list(ids)))

    session(world, rebuild, batch=100)
    assert lanes == [False, True, True]


def test_a_session_skips_shards_another_worker_holds(world: World) -> None:
    world.dirty.add(range(40), now_ms=1)
    held = world.coordination.lock("drain:1", ttl_ms=60_000)
    assert held.acquire()
    seen: list[list[int]] = []
    session(world, recording(seen), batch=100)
    assert {i % 4 for batch in seen for i in batch} == {0, 2, 3}
    assert [i for i, _ in world.dirty.take(100)] == sorted(range(1, 40, 4), key=str)
    held.release()
    session(world, recording(seen), batch=100)
    assert world.dirty.size() == 0


def test_a_session_fills_a_batch_from_several_shards_and_lets_the_locks_go(world: World) -> None:
    world.dirty.add(range(8), now_ms=1)  # two foci in each of the 4 shards
    seen: list[list[int]] = []
    assert session(world, recording(seen), batch=100) == 8
    assert [sorted(batch) for batch in seen] == [list(range(8))]  # one batch, not one per shard
    world.dirty.add(range(8), now_ms=2)
    seen.clear()
    assert session(world, recording(seen), batch=3) == 8
    assert [len(batch) for batch in seen] == [3, 3, 2]
    for shard in range(4):
        assert world.coordination.lock(f"drain:{shard}", ttl_ms=1).acquire()


def test_a_session_ends_when_nothing_is_settled(world: World) -> None:
    world.dirty.add([1], now_ms=world.clock())
    seen: list[list[int]] = []
    drain_session(world.dirty, world.coordination, recording(seen), batch=10, debounce_ms=50,
                  budget_s=60, clock_ms=world.clock, lock_ttl_ms=1_000)
    assert seen == [] and world.dirty.size() == 1
