"""One contract for the :class:`service.ports.SnapshotCache` port, run on every implementation:
in memory, on fakeredis, on the real Redis and on a local Redis Cluster. Here its core: writes are a
compare-and-set on the note's generation, the reverse index always equals what the stored snapshots
show, edit stamps tell a rebuild which notes were edited since it started, and an unreachable cache
fails with the service's own error. Decoding, the rebuild end to end and what only one kind of backend
shows are in the sibling ``test_cache_*`` modules (:mod:`tests.contracts.cache_contract` holds the
base they share).

The real Redis is ``GRAPHRAG_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``). It is a hard
requirement: when it cannot be reached the tests fail (setup error naming the URL), never skip. Each
test works under its own key prefix (``graphrag-test:<uuid>:v1``) and deletes its keys afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
import redis
from redis.exceptions import RedisClusterException

from graphrag.core.errors import CacheUnavailable
from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from service.rebuild import FULL_REBUILD
from tests.contracts.backends import backend_named
from tests.contracts.cache_contract import LAYERED_LIMITS, CacheContract, envelope, wf, write
from tests.redis.readers import snapshot_of


def layered_keys(note_id: int, seeds: Sequence[int]) -> list[SnapshotKey]:
    return [SnapshotKey(note_id, "layered", s, lim) for s in seeds for lim in LAYERED_LIMITS]


class ConsistencyContract(CacheContract):
    """Compare-and-set, the reverse index, edit stamps and unavailability, on every backend."""

    # -- compare-and-set --------------------------------------------------------------------------
    def test_cas_refuses_an_older_generation_written_after_a_newer_one(
        self, store: Any
    ) -> None:
        older = store.bump_generations([7])[7]
        newer = store.bump_generations([7])[7]
        assert newer > older
        assert write(store, envelope(7, newer, [1]))
        assert not write(store, envelope(7, older, [2]))
        stored = snapshot_of(store, 7, "wavefront", 0)
        assert stored is not None and stored.generation == newer and stored.depends_on == (1, 7)
        assert store.dependents([2]) == set()
        self.assert_index_matches(store)

    def test_cas_accepts_a_missing_counter_an_equal_and_a_newer_generation(
        self, store: Any
    ) -> None:
        assert store.generations([8]) == {8: 0}
        assert write(store, envelope(8, 0, [1]))
        current = store.bump_generations([8])[8]
        assert store.generations([8]) == {8: current}
        assert not write(store, envelope(8, 0, [1]))
        assert write(store, envelope(8, current, [2]))
        assert write(store, envelope(8, current + 5, [3]))
        stored = snapshot_of(store, 8, "wavefront", 0)
        assert stored is not None and stored.generation == current + 5
        self.assert_index_matches(store)

    def test_read_current_gives_the_snapshot_and_its_notes_generation_at_once(
        self, store: Any
    ) -> None:
        assert store.read_current(wf(4)) == (None, 0)
        generation = store.bump_generations([4])[4]
        assert store.read_current(wf(4)) == (None, generation)
        assert write(store, envelope(4, generation, [1]))
        assert store.read_current(wf(4)) == (store.read(wf(4)), generation)
        later = store.bump_generations([4])[4]  # an event affecting 4 after its computation
        raw, current = store.read_current(wf(4))
        stored = decode_envelope(raw)
        assert current == later and stored is not None and stored.generation < current

    def test_generations_keep_increasing_after_the_counter_is_lost(self, store: Any) -> None:
        first = store.bump_generations([1, 2, 3])
        self.backend.lose_generation(2)  # expiry or eviction
        second = store.bump_generations([1, 2, 3])
        assert all(second[i] > first[i] for i in (1, 2, 3))
        assert store.generations([1, 2, 3]) == second

    def test_delete_focus_is_a_compare_and_set_too(self, store: Any) -> None:
        assert write(store, envelope(5, 0, [6]))
        newer = store.bump_generations([5])[5]
        assert write(store, envelope(5, newer, [6]))
        assert not store.delete_focus(5, [wf(5)], generation=0)
        assert snapshot_of(store, 5, "wavefront", 0) is not None
        assert store.dependents([6]) == {5}
        assert store.delete_focus(5, [wf(5)], generation=newer)
        assert snapshot_of(store, 5, "wavefront", 0) is None

    # -- reverse index ----------------------------------------------------------------------------
    def test_reverse_index_equals_the_snapshots_contents_after_rewrites(
        self, store: Any
    ) -> None:
        steps = [
            envelope(1, 0, [10, 11]),
            envelope(1, 0, [11, 12], seed=1),
            envelope(2, 0, [10]),
            envelope(1, 0, [12, 13]),                 # drops 10 and 11 (11 still shown by seed 1)
            envelope(1, 0, [], seed=1),               # drops 11 and 12 (12 still shown by seed 0)
            envelope(1, 0, [14], strategy="layered", limit=2_500),
            envelope(2, 0, [13]),                     # drops 10
            envelope(1, 0, [10, 14], strategy="layered", limit=5_000),
        ]
        for step in steps:
            assert write(store, step)
            self.assert_index_matches(store)
        assert store.dependents([10]) == {1}
        assert store.dependents([11]) == set()
        assert store.dependents([12]) == {1}
        assert store.dependents([13]) == {1, 2}
        assert store.shown_by([1]) == {1: {1, 10, 12, 13, 14}}

    def test_a_refused_write_leaves_no_index_entries(self, store: Any) -> None:
        assert write(store, envelope(3, 0, [30]))
        store.bump_generations([3])
        assert not write(store, envelope(3, 0, [31, 32]))
        assert store.dependents([31]) == store.dependents([32]) == set()
        assert store.dependents([30]) == {3}
        self.assert_index_matches(store)

    def test_a_dependency_dropped_by_one_variant_and_added_by_another_stays(
        self, store: Any
    ) -> None:
        assert write(store, envelope(4, 0, [40]))
        assert store.write_many([envelope(4, 0, []), envelope(4, 0, [40], seed=1)]) == [True, True]
        assert store.dependents([40]) == {4}
        self.assert_index_matches(store)

    def test_a_batch_showing_more_notes_than_one_index_command_covers(self, store: Any) -> None:
        """1,200 foci, each showing note 100000 and a note of its own: 1,201 ``dep:`` keys, one of
        them with 1,200 members; one focus refused midway, its flag in its place."""
        foci = range(1, 1_201)
        newer = store.bump_generations([7])[7]
        accepted = store.write_many([envelope(f, 0, [100_000, 200_000 + f]) for f in foci])
        assert accepted == [f != 7 for f in foci]
        assert store.dependents([100_000]) == set(foci) - {7}
        assert all(store.dependents([200_000 + f]) == ({f} - {7}) for f in (1, 500, 501, 1_200))
        assert write(store, envelope(7, newer, [100_000]))
        self.assert_index_matches(store)

    def test_an_expired_snapshot_stops_counting_at_the_next_write(self, store: Any) -> None:
        assert write(store, envelope(9, 0, [90]))
        assert write(store, envelope(9, 0, [91], seed=1))
        self.backend.expire(wf(9, 1))  # as if its hard TTL ran out
        assert write(store, envelope(9, 0, [90]))
        assert store.dependents([91]) == set()
        self.assert_index_matches(store)

    def test_delete_focus_removes_snapshots_and_their_index_entries(self, store: Any) -> None:
        store.write_many([
            envelope(3, 0, [20]), envelope(3, 0, [21], seed=1),
            envelope(3, 0, [22], strategy="layered", limit=2_500), envelope(4, 0, [20]),
        ])
        assert store.delete_focus(3, [wf(3), wf(3, 1), *layered_keys(3, [0, 1])], generation=None)
        assert snapshot_of(store, 3, "wavefront", 0) is None
        assert snapshot_of(store, 3, "wavefront", 1) is None
        assert snapshot_of(store, 3, "layered", 0, 2_500) is None
        assert store.dependents([20]) == {4}
        assert store.dependents([21]) == store.dependents([22]) == store.dependents([3]) == set()
        assert not self.backend.has_shows(3)
        self.assert_index_matches(store)

    def test_a_watched_view_counts_among_the_dependents_apart_from_the_index(
        self, store: Any
    ) -> None:
        assert write(store, envelope(3, 0, [30]))
        store.watch_view(3, [31, "note:32"], ttl_ms=60_000)
        store.watch_view(4, [31, 30], ttl_ms=60_000)
        assert store.dependents([31]) == {3, 4}
        assert store.dependents(["note:32"]) == {3}
        assert store.dependents([30]) == {3, 4}
        assert store.dependents([33]) == set()
        self.assert_index_matches(store)  # the snapshots' reverse index is untouched
        assert write(store, envelope(3, 0, [34]))  # a rewrite does not drop what a view read
        assert store.dependents([31]) == {3, 4}

    def test_a_watched_view_stops_counting_when_it_expires(self, store: Any) -> None:
        store.watch_view(5, [50], ttl_ms=20)
        deadline = time.monotonic() + 10
        while store.dependents([50]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.dependents([50]) == set()

    # -- edit stamps and unavailability -----------------------------------------------------------
    def test_touched_since_reports_notes_edited_after_a_sequence_number(
        self, store: Any
    ) -> None:
        before = store.current_seq()
        stamp = store.stamp_touched([5, 6])
        assert stamp > before
        assert store.touched_since([5, 6, 7], before) == {5, 6}
        assert store.touched_since([5, 6, 7], stamp) == set()

    def test_stamping_no_note_still_takes_a_new_sequence_number(self, store: Any) -> None:
        before = store.current_seq()
        assert store.stamp_touched(()) > before
        assert store.current_seq() > before

    def test_stamps_from_before_a_lost_sequence_are_not_newer_than_it(self, store: Any) -> None:
        for _ in range(3):
            store.stamp_touched([5])
        store.stamp_touched([FULL_REBUILD])  # a full rebuild started
        self.backend.lose_seq()  # a cluster primary restarted empty, an eviction
        read_by_a_rebuild = store.current_seq()
        assert store.touched_since([5, FULL_REBUILD], read_by_a_rebuild) == set()  # not raced
        assert store.stamp_touched([6]) > read_by_a_rebuild
        later = store.current_seq()
        assert store.touched_since([5, 6], later) == set()  # else: requeued on every rebuild

    def test_an_unreachable_cache_raises_cache_unavailable(self) -> None:
        with backend_named(self.backend_name, connected=False) as down:
            store = down.cache
            calls = [
                lambda: store.read(wf(1)), lambda: write(store, envelope(1, 0, [2])),
                lambda: store.bump_generations([1]), lambda: store.generations([1]),
                lambda: store.dependents([1]), lambda: store.watch_view(1, [2], ttl_ms=9),
                lambda: store.delete_focus(1, [wf(1)]),
            ]
            for call in calls:
                with pytest.raises(CacheUnavailable) as caught:
                    call()
                if self.backend_name != "memory":  # a driver error, translated at the seam
                    assert isinstance(caught.value.__cause__, redis.ConnectionError | redis.TimeoutError
                                      | RedisClusterException)


class TestMemoryCache(ConsistencyContract):
    backend_name = "memory"


class TestFakeRedisCache(ConsistencyContract):
    backend_name = "fakeredis"


@pytest.mark.redis
class TestRealRedisCache(ConsistencyContract):
    backend_name = "redis"


@pytest.mark.redis
class TestPinnedRedisCache(ConsistencyContract):
    """The reads of the HTTP server's event loop: through a connection of its own."""

    backend_name = "pinned"


@pytest.mark.redis
class TestClusterCache(ConsistencyContract):
    backend_name = "cluster"
