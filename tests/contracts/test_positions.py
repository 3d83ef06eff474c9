"""The contracts of change capture's position store and heartbeat (:class:`service.ports.PositionStore`,
:class:`service.ports.FeedHeartbeat`) on every backend: in memory, fakeredis, Redis, a cluster.

Change capture's place in the log survives as written (no TTL: a quiet week must not lose it), the
last write wins, and an unreachable store fails with the service's own error, never a driver's. Its
heartbeat reads back with the lag it was written with, ages on the store's clock, has no TTL either
(a feed that stopped must read as old, never as absent) and is gone once forgotten.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from graphrag.core.errors import CacheUnavailable
from tests.contracts.backends import CacheBackend, backend_named


class PositionStoreContract:
    backend_name = ""

    @pytest.fixture
    def backend(self) -> Iterator[CacheBackend]:
        with backend_named(self.backend_name) as backend:
            yield backend

    def test_nothing_is_stored_at_first(self, backend: Any) -> None:
        assert backend.positions().get() is None

    def test_the_last_position_written_is_read_back(self, backend: Any) -> None:
        store = backend.positions()
        store.put("gtid:0-1-10")
        store.put("file:bin.000002:4711")
        assert backend.positions().get() == "file:bin.000002:4711"
        store.forget()
        assert backend.positions().get() is None

    def test_an_unreachable_store_fails_with_the_services_error(self) -> None:
        with backend_named(self.backend_name, connected=False) as down, \
                pytest.raises(CacheUnavailable):
            down.positions().put("gtid:0-1-1")

    def test_a_heartbeat_reads_back_its_lag_and_ages(self, backend: Any) -> None:
        heartbeat = backend.heartbeat()
        assert heartbeat.read() is None
        heartbeat.beat(behind_ms=1_500)
        first = backend.heartbeat().read()
        assert first is not None and first.behind_ms == 1_500 and 0 <= first.age_ms < 5_000
        time.sleep(0.3)
        later = heartbeat.read()
        assert later is not None and later.age_ms >= first.age_ms + 250
        heartbeat.beat(behind_ms=0)
        again = heartbeat.read()
        assert again is not None and again.behind_ms == 0 and again.age_ms < later.age_ms
        heartbeat.forget()
        assert heartbeat.read() is None

    def test_an_unreachable_heartbeat_fails_with_the_services_error(self) -> None:
        with backend_named(self.backend_name, connected=False) as down, \
                pytest.raises(CacheUnavailable):
            down.heartbeat().read()


class TestMemoryPositions(PositionStoreContract):
    backend_name = "memory"


class TestFakeRedisPositions(PositionStoreContract):
    backend_name = "fakeredis"


@pytest.mark.redis
class TestRealRedisPositions(PositionStoreContract):
    backend_name = "redis"

    def test_the_position_has_no_ttl(self, backend: Any) -> None:
        backend.positions().put("gtid:0-1-5")
        assert backend.client.ttl(backend.keys.cdc_position()) == -1

    def test_the_heartbeat_has_no_ttl_and_a_foreign_value_reads_as_old(self, backend: Any) -> None:
        backend.heartbeat().beat(behind_ms=3)
        assert backend.client.ttl(backend.keys.cdc_heartbeat()) == -1
        backend.client.set(backend.keys.cdc_heartbeat(), b"not a heartbeat")
        beat = backend.heartbeat().read()
        assert beat is not None and beat.age_ms > 10**12


@pytest.mark.redis
class TestClusterPositions(PositionStoreContract):
    backend_name = "cluster"
