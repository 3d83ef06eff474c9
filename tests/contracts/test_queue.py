"""The dirty set's contract (service.ports.DirtyQueue), run on every backend.

Shards and lanes: an id lives in one shard and one lane; the urgent lane is served first; an id
leaves only through ``done`` with the score ``take`` saw; a leased id is in one drain's hands until
its lease is let go or expires, and a lease belongs to the score it was taken with. The Redis
backends add what only they can lose: ids left in shards beyond today's count or in an older
unsharded set, scripts flushed by a restart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from graphrag.core.errors import CacheUnavailable
from tests.contracts.backends import CacheBackend, backend_named

SHARDS = 4


class DirtyQueueContract:
    backend_name = ""

    @pytest.fixture
    def backend(self) -> Iterator[CacheBackend]:
        with backend_named(self.backend_name) as backend:
            yield backend

    @pytest.fixture
    def dirty(self, backend: CacheBackend) -> Any:
        return backend.dirty_queue(SHARDS)

    def test_each_shard_holds_exactly_its_own_ids(self, dirty: Any) -> None:
        assert dirty.add(range(20), now_ms=1_000) == 20
        for shard in range(SHARDS):
            taken = dirty.take(100, shard=shard)
            assert {i for i, _ in taken} == {i for i in range(20) if dirty.shard_of(i) == shard}
        assert dirty.size() == 20

    def test_the_urgent_lane_is_served_before_older_wide_ids(self, dirty: Any) -> None:
        dirty.add([1, 5, 9], now_ms=1_000)
        dirty.add([13], now_ms=2_000, lane="urgent")
        assert dirty.take(2, shard=1) == [(13, 2_000.0), (1, 1_000.0)]
        assert dirty.take(10, shard=1) == [(13, 2_000.0), (1, 1_000.0), (5, 1_000.0), (9, 1_000.0)]
        assert dirty.done([(13, 2_000.0)]) == 1
        assert dirty.take(10, shard=1) == [(1, 1_000.0), (5, 1_000.0), (9, 1_000.0)]

    def test_an_urgent_only_take_leaves_the_wide_lane_alone(self, dirty: Any) -> None:
        dirty.add([1, 5], now_ms=1_000)
        dirty.add([9, 13], now_ms=2_000, lane="urgent")
        assert dirty.take(10, shard=1, lanes=("urgent",)) == [(13, 2_000.0), (9, 2_000.0)]
        assert [i for i, _ in dirty.take(10, lanes=("urgent",))] == [13, 9]
        assert dirty.done([(9, 2_000.0), (13, 2_000.0)]) == 2
        assert dirty.take(10, shard=1, lanes=("urgent",)) == []
        assert dirty.take(10, shard=1) == [(1, 1_000.0), (5, 1_000.0)]

    def test_a_wide_only_take_leaves_the_urgent_lane_alone(self, dirty: Any) -> None:
        dirty.add([1, 5], now_ms=1_000)
        dirty.add([9, 13], now_ms=500, lane="urgent")
        assert dirty.take(10, shard=1, lanes=("wide",)) == [(1, 1_000.0), (5, 1_000.0)]
        assert [i for i, _ in dirty.take(10, lanes=("wide",))] == [1, 5]
        assert dirty.take(1, shard=1, lanes=("wide",)) == [(1, 1_000.0)]
        assert dirty.done([(1, 1_000.0), (5, 1_000.0)]) == 2
        assert dirty.take(10, shard=1, lanes=("wide",)) == []
        assert dirty.take(10, shard=1) == [(13, 500.0), (9, 500.0)]

    def test_ready_lanes_name_each_lanes_settled_shards_oldest_first(self, dirty: Any) -> None:
        dirty.add([2], now_ms=3_000, lane="urgent")
        dirty.add([1], now_ms=2_000, lane="urgent")
        dirty.add([3], now_ms=1_000)
        dirty.add([6], now_ms=1_500)
        dirty.add([5], now_ms=4_000)
        dirty.add([7], now_ms=2_200, lane="near")
        assert dirty.ready_lanes() == ([1, 2], [3], [3, 2, 1])
        assert dirty.ready_lanes(settled_before_ms=2_100) == ([1], [], [3, 2])
        assert dirty.ready(settled_before_ms=2_500) == [1, 3, 2]

    def test_shards_whose_oldest_ids_tie_are_ready_in_shard_order(self, dirty: Any) -> None:
        dirty.add([5, 10], now_ms=1_000)  # shards 1 and 2: "10" sorts before "5" as a member
        assert dirty.ready() == [1, 2] and dirty.ready_lanes() == ([], [], [1, 2])

    def test_the_near_lane_is_served_after_the_urgent_one_and_before_the_wide_one(
            self, dirty: Any) -> None:
        dirty.add([1], now_ms=500)
        dirty.add([5], now_ms=1_000, lane="near")
        dirty.add([9], now_ms=2_000, lane="urgent")
        assert dirty.take(10, shard=1) == [(9, 2_000.0), (5, 1_000.0), (1, 500.0)]
        assert dirty.take(10, shard=1, lanes=("near",)) == [(5, 1_000.0)]
        assert [i for i, _ in dirty.take(10, lanes=("wide", "near"))] == [1, 5]

    def test_an_id_moves_only_to_a_more_urgent_lane_and_then_loses_its_lease(
            self, dirty: Any) -> None:
        dirty.add([1], now_ms=1_000)
        wide = dirty.take(10, shard=1, lease_ms=60_000)
        dirty.add([1], now_ms=2_000, lane="near")  # moved: the wide batch's lease let go
        assert dirty.take(10, shard=1, lanes=("near",), lease_ms=60_000) == [(1, 2_000.0)]
        assert dirty.done(wide) == 0
        dirty.add([1], now_ms=3_000)  # a wide add: still near, leased
        assert dirty.take(10, shard=1) == []
        dirty.add([1], now_ms=4_000, lane="urgent")  # moved again, free again
        assert dirty.take(10, shard=1, lanes=("urgent",)) == [(1, 4_000.0)]
        dirty.add([1], now_ms=5_000, lane="near")  # a near add of an urgent id: still urgent
        assert dirty.take(10, shard=1, lanes=("near", "wide")) == []
        assert dirty.size() == 1

    def test_a_full_urgent_batch_leaves_the_wide_lane_waiting(self, dirty: Any) -> None:
        dirty.add([1], now_ms=500)
        dirty.add([5, 9], now_ms=2_000, lane="urgent")
        assert dirty.take(2, shard=1) == [(5, 2_000.0), (9, 2_000.0)]

    def test_an_urgent_add_moves_a_wide_id_and_the_old_score_no_longer_removes_it(
            self, dirty: Any) -> None:
        dirty.add([1], now_ms=1_000)
        taken_before = dirty.take(10, shard=1)
        assert dirty.add([1], now_ms=2_000, lane="urgent") == 0
        assert dirty.size() == 1
        assert dirty.done(taken_before) == 0
        assert dirty.take(10, shard=1) == [(1, 2_000.0)]

    def test_an_add_with_the_same_or_an_older_clock_still_keeps_a_taken_id(self, dirty: Any) -> None:
        """Two events whose clocks read the same millisecond (or a worker's clock behind another's):
        the second add still changes the score, so the drain that took the first lets nothing go."""
        dirty.add([1, 5], now_ms=1_000)
        taken = dirty.take(10, shard=1)
        assert dirty.add([1], now_ms=1_000) == 0
        assert dirty.add([5], now_ms=400, lane="urgent") == 0
        assert dirty.done(taken) == 0
        assert dirty.take(10, shard=1) == [(5, 1_001.0), (1, 1_001.0)]
        assert dirty.add([1], now_ms=1_001) == 0  # the same again: one more
        assert dirty.add([1], now_ms=5_000) == 0  # a clock ahead: its own reading
        assert dirty.take(10, shard=1, lanes=("urgent",)) == [(5, 1_001.0)]
        assert dirty.take(10, shard=1) == [(5, 1_001.0), (1, 5_000.0)]

    def test_a_wide_add_of_an_urgent_id_keeps_it_urgent_with_the_new_score(self, dirty: Any) -> None:
        dirty.add([2], now_ms=1_000, lane="urgent")
        dirty.add([6], now_ms=500)
        dirty.add([2], now_ms=3_000)
        assert dirty.take(10, shard=2) == [(2, 3_000.0), (6, 500.0)]  # still ahead of the older 6
        assert dirty.size() == 2

    def test_taking_from_every_shard_gives_urgent_ids_first_then_the_oldest(self, dirty: Any) -> None:
        dirty.add([1, 2], now_ms=1_000)
        dirty.add([3], now_ms=3_000, lane="urgent")
        dirty.add([6], now_ms=2_000)
        assert dirty.take(3) == [(3, 3_000.0), (1, 1_000.0), (2, 1_000.0)]
        assert dirty.take(10, settled_before_ms=1_500) == [(1, 1_000.0), (2, 1_000.0)]

    def test_done_removes_only_pairs_whose_score_is_unchanged(self, dirty: Any) -> None:
        dirty.add([1, 2, 3], now_ms=1_000)
        taken = dirty.take(10)
        dirty.add([2], now_ms=1_500)
        assert dirty.done(taken) == 2
        assert dirty.take(10) == [(2, 1_500.0)]

    def test_ready_lists_urgent_shards_first_then_the_oldest_and_only_settled_ones(
            self, dirty: Any) -> None:
        dirty.add([1], now_ms=3_000)
        dirty.add([2], now_ms=1_000)
        dirty.add([7], now_ms=2_000, lane="urgent")
        dirty.add([8], now_ms=9_000)
        assert dirty.ready() == [3, 2, 1, 0]
        assert dirty.ready(settled_before_ms=2_500) == [3, 2]
        assert dirty.take(10, shard=0, settled_before_ms=2_500) == []

    def test_take_honours_the_limit_and_the_settled_time(self, dirty: Any) -> None:
        for at, note in enumerate([12, 4, 8]):
            dirty.add([note], now_ms=1_000 + at)
        dirty.add([16], now_ms=5_000)
        assert dirty.take(2, shard=0) == [(12, 1_000.0), (4, 1_001.0)]
        assert [i for i, _ in dirty.take(10, shard=0, settled_before_ms=1_002)] == [12, 4, 8]

    def test_size_and_oldest_cover_every_shard_and_lane(self, dirty: Any) -> None:
        assert (dirty.size(), dirty.oldest_ms(), dirty.ready()) == (0, None, [])
        dirty.add([5, 6], now_ms=2_000)
        dirty.add([3], now_ms=1_500, lane="urgent")
        assert (dirty.size(), dirty.oldest_ms()) == (3, 1_500.0)

    def test_a_leased_id_is_not_taken_again_until_let_go(self, dirty: Any) -> None:
        dirty.add([1, 5, 9], now_ms=1_000)
        leased = dirty.take(2, shard=1, lease_ms=60_000)
        assert leased == [(1, 1_000.0), (5, 1_000.0)]
        assert dirty.take(10, shard=1) == [(9, 1_000.0)] and dirty.take(10) == [(9, 1_000.0)]
        assert dirty.size() == 3 and dirty.ready() == [1]
        assert dirty.release(leased) == 2 and dirty.release(leased) == 0
        assert dirty.take(10, shard=1) == [(1, 1_000.0), (5, 1_000.0), (9, 1_000.0)]

    def test_leases_skip_as_many_older_ids_as_are_leased(self, dirty: Any) -> None:
        dirty.add(range(0, 400, 4), now_ms=1_000)  # shard 0
        first = dirty.take(50, shard=0, lease_ms=60_000)
        second = dirty.take(60, shard=0, lease_ms=60_000)
        assert len(first) == len(second) == 50 and not {*first} & {*second}
        assert dirty.take(10, shard=0) == []
        assert dirty.done(first + second) == 100 and dirty.size() == 0

    def test_done_lets_go_of_the_lease_of_an_id_it_keeps(self, dirty: Any) -> None:
        dirty.add([1, 5], now_ms=1_000)
        leased = dirty.take(10, shard=1, lease_ms=60_000)
        dirty.add([5], now_ms=2_000)  # edited during its rebuild: a wide add keeps the lease
        assert dirty.take(10, shard=1) == []
        assert dirty.done(leased) == 1
        assert dirty.take(10, shard=1) == [(5, 2_000.0)]

    def test_a_lease_belongs_to_the_score_it_was_taken_with(self, dirty: Any) -> None:
        dirty.add([5], now_ms=1_000)
        wide = dirty.take(10, shard=1, lease_ms=60_000)
        dirty.add([5], now_ms=2_000, lane="urgent")  # the edit's own note: let go of the wide lease
        urgent = dirty.take(10, shard=1, lease_ms=60_000)
        assert urgent == [(5, 2_000.0)]
        assert dirty.done(wide) == 0 and dirty.take(10, shard=1) == []  # not the later lease
        assert dirty.renew(wide, lease_ms=60_000) == 0 and dirty.release(wide) == 0
        assert dirty.renew(urgent, lease_ms=60_000) == 1 and dirty.take(10, shard=1) == []
        assert dirty.release(urgent) == 1 and dirty.take(10, shard=1) == [(5, 2_000.0)]

    def test_an_urgent_add_keeps_the_lease_of_an_urgent_id(self, dirty: Any) -> None:
        dirty.add([5], now_ms=1_000, lane="urgent")
        leased = dirty.take(10, shard=1, lease_ms=60_000)
        dirty.add([5], now_ms=2_000, lane="urgent")
        assert dirty.take(10, shard=1) == []
        assert dirty.done(leased) == 0 and dirty.take(10, shard=1) == [(5, 2_000.0)]

    def test_an_expired_lease_is_taken_over(self, dirty: Any) -> None:
        dirty.add([1], now_ms=1_000)
        dead = dirty.take(10, shard=1, lease_ms=1)
        time.sleep(0.05)
        assert dirty.take(10, shard=1, lease_ms=60_000) == [(1, 1_000.0)]
        assert dirty.take(10, shard=1) == []
        assert dirty.done(dead) == 1 and dirty.size() == 0  # a slow drain's rebuild still counts

    def test_a_take_deletes_the_dead_leases_it_meets(self, dirty: Any) -> None:
        dirty.add([1], now_ms=1_000)
        dead = dirty.take(10, shard=1, lease_ms=1)
        time.sleep(0.05)
        assert dirty.take(10, shard=1) == dead
        assert dirty.renew(dead, lease_ms=60_000) == 0 and dirty.take(10, shard=1) == dead

    def test_a_lease_is_taken_from_one_shard(self, dirty: Any) -> None:
        with pytest.raises(ValueError, match="one shard"):
            dirty.take(10, lease_ms=1_000)

    def test_an_empty_call_changes_nothing(self, dirty: Any) -> None:
        assert dirty.add([], now_ms=1) == 0
        assert dirty.done([]) == 0
        assert dirty.adopt() == 0

    def test_an_unreachable_store_raises_cache_unavailable(self) -> None:
        with backend_named(self.backend_name, connected=False) as backend:
            dirty = backend.dirty_queue(SHARDS)
            for call in (lambda: dirty.add([1], now_ms=1), lambda: dirty.take(1),
                         lambda: dirty.take(1, shard=0, lease_ms=1_000),
                         lambda: dirty.renew([(1, 1.0)], lease_ms=1_000),
                         lambda: dirty.release([(1, 1.0)]),
                         lambda: dirty.done([(1, 1.0)]), dirty.size, dirty.ready):
                with pytest.raises(CacheUnavailable):
                    call()


class RedisDirtyQueueContract(DirtyQueueContract):
    def test_ids_of_dropped_shards_and_of_the_unsharded_set_are_adopted(
            self, backend: Any) -> None:
        wide = backend.dirty_queue(8)
        wide.add([5, 7], now_ms=1_000)
        wide.add([6], now_ms=1_200, lane="urgent")
        backend.client.zadd(backend.keys.legacy_dirty(), {b"9": 900})
        narrow = backend.dirty_queue(SHARDS)
        assert narrow.adopt() == 4
        assert narrow.take(10, shard=2) == [(6, 1_200.0)]
        assert sorted(narrow.take(10, shard=1)) == [(5, 1_000.0), (9, 900.0)]
        assert narrow.take(10, shard=3) == [(7, 1_000.0)]
        assert narrow.size() == 4 and narrow.adopt() == 0

    def test_ids_of_a_changed_shard_count_are_moved_to_their_shards(self, backend: Any) -> None:
        two = backend.dirty_queue(2)
        assert two.adopt() == 0
        two.add([3, 4, 7], now_ms=1_000)  # shards 1, 0, 1 of two
        two.add([5], now_ms=1_200, lane="urgent")
        assert [i for i, _ in two.take(10, shard=1, lease_ms=60_000)] == [5, 3, 7]
        three = backend.dirty_queue(3)
        assert three.adopt() == 3 and three.adopt() == 0  # 3, 4 and 5 live elsewhere among three
        assert sorted(three.take(10, shard=0)) == [(3, 1_000.0)]
        assert three.take(10, shard=1) == [(4, 1_000.0)]  # 7 stayed, and stays leased
        assert three.take(10, shard=2, lanes=("urgent",)) == [(5, 1_200.0)]
        assert three.done([(3, 1_000.0), (4, 1_000.0), (7, 1_000.0), (5, 1_200.0)]) == 4
        assert three.size() == 0

    def test_scripts_flushed_by_a_restart_are_loaded_again(self, backend: Any, dirty: Any) -> None:
        dirty.add([1], now_ms=1_000)
        backend.client.script_flush()
        assert dirty.take(10) == [(1, 1_000.0)]
        assert dirty.done([(1, 1_000.0)]) == 1


class TestMemoryDirtyQueue(DirtyQueueContract):
    backend_name = "memory"


class TestFakeRedisDirtyQueue(RedisDirtyQueueContract):
    backend_name = "fakeredis"


@pytest.mark.redis
class TestRealRedisDirtyQueue(RedisDirtyQueueContract):
    backend_name = "redis"


@pytest.mark.redis
class TestClusterDirtyQueue(RedisDirtyQueueContract):
    backend_name = "cluster"
