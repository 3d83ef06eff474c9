"""The contract of :class:`service.ports.PositionStore` on every backend: in memory, fakeredis, Redis.

Change capture's place in the log survives as written (no TTL: a quiet week must not lose it), the
last write wins, and an unreachable store fails with the service's own error, never a driver's.
"""

from __future__ import annotations

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

    def test_an_unreachable_store_fails_with_the_services_error(self) -> None:
        with backend_named(self.backend_name, connected=False) as down, \
                pytest.raises(CacheUnavailable):
            down.positions().put("gtid:0-1-1")


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


@pytest.mark.redis
class TestClusterPositions(PositionStoreContract):
    backend_name = "cluster"
