"""The contract of hearing of snapshot writes (:class:`service.ports.SnapshotChanges`), on every
backend: in memory, fakeredis, Redis and a Cluster.

A listener hears exactly the watched foci whose snapshots were written (an accepted write, not a
refused one) or deleted, and reports each watch once it took effect; it never reports a focus it
does not watch, nor one it stopped watching.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from graphrag.core.errors import CacheUnavailable
from tests.contracts.backends import CacheBackend, backend_named
from tests.contracts.cache_contract import envelope

WAIT_S = 5.0


def _settled(listener: Any) -> set[int]:
    """Everything heard until a quiet moment (a watch's confirmation comes first)."""
    heard: set[int] = set()
    while more := listener.heard(0.3):
        heard |= more
    return heard


def _next(listener: Any) -> set[int]:
    """What the next hearing brings, waiting for it."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if heard := listener.heard(0.2):
            return heard
    return set()


class ChangesContract:
    backend_name = ""

    @pytest.fixture
    def backend(self) -> Iterator[CacheBackend]:
        with backend_named(self.backend_name) as backend:
            yield backend

    @pytest.fixture
    def listener(self, backend: CacheBackend) -> Iterator[Any]:
        listener = backend.changes().listener()
        yield listener
        listener.close()

    def test_watching_says_what_is_watched(self, listener: Any) -> None:
        listener.watch([7, 9])
        listener.unwatch([9])
        assert listener.watching() == {7}

    def test_a_watch_is_reported_once_it_takes_effect(self, listener: Any) -> None:
        listener.watch([7, 1_000_003])
        assert _settled(listener) == {7, 1_000_003}
        assert listener.heard(0.2) == set()

    def test_an_accepted_write_of_a_watched_focus_is_heard(self, backend: CacheBackend,
                                                           listener: Any) -> None:
        listener.watch([7])
        _settled(listener)
        assert backend.cache.write_many([envelope(7, 1, [8])]) == [True]
        assert _next(listener) == {7}

    def test_only_watched_foci_are_heard(self, backend: CacheBackend, listener: Any) -> None:
        listener.watch([7, 9])
        _settled(listener)
        backend.cache.write_many([envelope(8, 1, [7]), envelope(9, 1, [7])])
        assert _next(listener) == {9}
        assert listener.heard(0.3) == set()

    def test_a_refused_write_is_not_heard(self, backend: CacheBackend, listener: Any) -> None:
        backend.cache.bump_generations([7])
        listener.watch([7])
        _settled(listener)
        assert backend.cache.write_many([envelope(7, 1, [8])]) == [False]
        assert listener.heard(0.5) == set()

    def test_a_deletion_is_heard(self, backend: CacheBackend, listener: Any) -> None:
        backend.cache.write_many([envelope(7, 1, [8])])
        listener.watch([7])
        _settled(listener)
        assert backend.cache.delete_focus(7)
        assert _next(listener) == {7}

    def test_an_unwatched_focus_is_no_longer_heard(self, backend: CacheBackend,
                                                   listener: Any) -> None:
        listener.watch([7, 9])
        _settled(listener)
        listener.unwatch([7])
        listener.heard(0.2)  # the unwatch takes effect
        backend.cache.write_many([envelope(7, 1, [8]), envelope(9, 1, [8])])
        assert _next(listener) == {9}

    def test_two_listeners_hear_the_same_write(self, backend: CacheBackend, listener: Any) -> None:
        other = backend.changes().listener()
        try:
            listener.watch([7])
            other.watch([7])
            _settled(listener), _settled(other)
            backend.cache.write_many([envelope(7, 1, [8])])
            assert _next(listener) == {7} and _next(other) == {7}
        finally:
            other.close()


class TestMemoryChanges(ChangesContract):
    backend_name = "memory"

    def test_a_cache_that_is_down_says_so(self) -> None:
        with backend_named("memory", connected=False) as down, pytest.raises(CacheUnavailable):
            down.changes().listener().heard(0.1)


class TestFakeRedisChanges(ChangesContract):
    backend_name = "fakeredis"


@pytest.mark.redis
class TestRealRedisChanges(ChangesContract):
    backend_name = "redis"

    def test_an_unreachable_redis_is_unavailable_not_a_driver_error(self) -> None:
        with backend_named("redis", connected=False) as down:
            listener = down.changes().listener()
            listener.watch([7])
            with pytest.raises(CacheUnavailable):
                listener.heard(0.1)

    def test_an_unwatch_leaves_the_channel(self, backend: Any, listener: Any) -> None:
        listener.watch([7, 9])
        _settled(listener)
        listener.unwatch([7])
        listener.heard(0.2)
        counts = backend.client.execute_command(
            "PUBSUB", "SHARDNUMSUB", backend.keys.changed(7), backend.keys.changed(9))
        assert [int(n) for n in counts[1::2]] == [0, 1]

    def test_a_lost_connection_reports_every_watch_again(self, backend: Any, listener: Any) -> None:
        listener.watch([7, 9])
        _settled(listener)
        host, port = listener._pubsub.connection._sock.getsockname()[:2]
        assert backend.client.client_kill_filter(addr=f"{host}:{port}") == 1
        heard: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        while heard != {7, 9} and time.monotonic() < deadline:
            try:
                heard |= listener.heard(0.2)
            except CacheUnavailable:
                continue
        assert heard == {7, 9}


@pytest.mark.redis
class TestClusterChanges(ChangesContract):
    backend_name = "cluster"

    def test_a_listener_is_made_while_the_cluster_is_down(self) -> None:
        with backend_named("cluster", connected=False) as down:
            listener = down.changes().listener()  # no connection yet: a process may start
            listener.watch([7])
            with pytest.raises(CacheUnavailable):
                listener.heard(0.1)

    def test_foci_on_every_node_are_heard(self, backend: CacheBackend, listener: Any) -> None:
        foci = list(range(100, 130))  # 30 hash tags: every node of the 3-primary cluster
        listener.watch(foci)
        assert _settled(listener) == set(foci)
        backend.cache.write_many([envelope(f, 1, [f + 1]) for f in foci])
        heard: set[int] = set()
        deadline = time.monotonic() + WAIT_S
        while heard != set(foci) and time.monotonic() < deadline:
            heard |= listener.heard(0.2)
        assert heard == set(foci)
