"""The contract of a key prefix's binding to one database (:class:`service.binding.PrefixBinding`)
on every backend: in memory, fakeredis, Redis, a cluster.

An unbound prefix binds to the first database that checks it; the same database passes again; a
second database is refused with one line naming both; only a take-over moves the binding, and it
leaves nothing of the first database's behind (snapshots, the edit sequence, change capture's
position), while what belongs to no database (the scheduler's keys) stays.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from graphrag.core.errors import CacheUnavailable, ConfigurationError, DatabaseUnavailable
from service.binding import (
    RETRY_MS,
    DatabaseIdentity,
    DatabaseStamp,
    PrefixOfAnotherDatabase,
    check_binding,
    take_over,
)
from storage.memory_binding import MemoryBinding
from tests.contracts.backends import CacheBackend, backend_named
from tests.contracts.cache_contract import envelope, wf, write

FIRST = DatabaseIdentity.of("doughnut-2026", "doughnut", [(1, "2025-01-01 09:00:00")])
SECOND = DatabaseIdentity.of("doughnut-2026", "doughnut", [(1, "2025-03-07 17:30:00")])


def test_an_identity_is_its_layout_name_and_oldest_notes() -> None:
    again = DatabaseIdentity.of("doughnut-2026", "doughnut", [(1, "2025-01-01 09:00:00")])
    assert again == FIRST and len(FIRST.digest) == 16
    assert FIRST.digest != SECOND.digest
    assert DatabaseIdentity.of("doughnut-2026", "staging", [(1, "2025-01-01 09:00:00")]) != FIRST
    assert DatabaseIdentity.of("doughnut-2025", "doughnut", [(1, "2025-01-01 09:00:00")]) != FIRST
    assert "oldest note 1 of 2025-01-01 09:00:00" in FIRST.description
    assert DatabaseIdentity.from_bytes(FIRST.to_bytes()) == FIRST
    assert DatabaseIdentity.from_bytes(b"not json") is None


class BindingContract:
    backend_name = ""

    @pytest.fixture
    def backend(self) -> Iterator[CacheBackend]:
        with backend_named(self.backend_name) as backend:
            yield backend

    def test_the_first_database_binds_an_unbound_prefix_and_passes_again(self, backend: Any) -> None:
        assert backend.binding().bound() is None
        check_binding(backend.binding(), FIRST)
        assert backend.binding().bound() == FIRST
        check_binding(backend.binding(), FIRST)

    def test_another_database_is_refused_naming_both(self, backend: Any) -> None:
        check_binding(backend.binding(), FIRST)
        with pytest.raises(PrefixOfAnotherDatabase) as refused:
            check_binding(backend.binding(), SECOND)
        line = str(refused.value)
        assert "\n" not in line and isinstance(refused.value, ConfigurationError)
        assert FIRST.digest in line and SECOND.digest in line and "take-over" in line
        assert backend.binding().bound() == FIRST

    def test_a_bind_race_is_won_by_one_database(self, backend: Any) -> None:
        assert backend.binding().bind(FIRST) == FIRST
        assert backend.binding().bind(SECOND) == FIRST

    def test_a_take_over_leaves_nothing_of_the_first_database(self, backend: Any) -> None:
        check_binding(backend.binding(), FIRST)
        assert write(backend.cache, envelope(3, backend.cache.bump_generations([3])[3], [4]))
        backend.positions().put("gtid:0-1-9")
        backend.cache.stamp_touched([3])
        assert take_over(backend.binding(), SECOND) > 0
        assert backend.binding().bound() == SECOND
        check_binding(backend.binding(), SECOND)
        assert backend.cache.read(wf(3)) is None
        assert backend.positions().get() is None
        assert backend.cache.dependents([4]) == set()
        with pytest.raises(PrefixOfAnotherDatabase):
            check_binding(backend.binding(), FIRST)

    def test_an_unreachable_store_fails_with_the_services_error(self) -> None:
        with backend_named(self.backend_name, connected=False) as down, \
                pytest.raises(CacheUnavailable):
            check_binding(down.binding(), FIRST)


class TestMemoryBinding(BindingContract):
    backend_name = "memory"


class TestFakeRedisBinding(BindingContract):
    backend_name = "fakeredis"


@pytest.mark.redis
class TestRealRedisBinding(BindingContract):
    backend_name = "redis"

    def test_the_binding_has_no_ttl_and_the_schedulers_keys_stay(self, backend: Any) -> None:
        check_binding(backend.binding(), FIRST)
        assert backend.client.ttl(backend.keys.binding()) == -1
        schedule = f"{backend.keys.prefix}:redbeat::schedule"
        backend.client.set(schedule, b"kept")
        take_over(backend.binding(), SECOND)
        assert backend.client.get(schedule) == b"kept"


@pytest.mark.redis
class TestClusterBinding(BindingContract):
    backend_name = "cluster"


# -- a process's stamp (service.binding.DatabaseStamp) ---------------------------------------------
class Database:
    """This process's database: its identity, or down."""

    def __init__(self, identity: DatabaseIdentity) -> None:
        self.identity_, self.down, self.asked = identity, False, 0

    def identity(self) -> DatabaseIdentity:
        self.asked += 1
        if self.down:
            raise DatabaseUnavailable("database unreachable")
        return self.identity_


def stamp(database: Database, binding: MemoryBinding, clock: list[int]) -> DatabaseStamp:
    return DatabaseStamp(database.identity, binding, clock_ms=lambda: clock[0])


def test_a_stamp_checked_at_start_is_its_databases_digest() -> None:
    binding, database = MemoryBinding(), Database(FIRST)
    checked = stamp(database, binding, [0])
    assert checked.check() == FIRST and checked.digest == FIRST.digest
    assert binding.bound() == FIRST and database.asked == 1


def test_a_database_down_at_start_serves_the_bound_digest_until_it_answers() -> None:
    binding, database, clock = MemoryBinding(), Database(FIRST), [0]
    binding.bind(FIRST)
    database.down = True
    late = stamp(database, binding, clock)
    assert late.digest == FIRST.digest and late.digest == FIRST.digest
    assert database.asked == 1, "asked again only after RETRY_MS"
    database.down = False
    clock[0] += RETRY_MS
    assert late.digest == FIRST.digest and database.asked == 2


def test_another_database_learnt_late_refuses_every_use() -> None:
    binding, database, clock = MemoryBinding(), Database(SECOND), [0]
    binding.bind(FIRST)
    database.down = True
    late = stamp(database, binding, clock)
    assert late.digest == FIRST.digest, "provisionally the prefix's"
    database.down, clock[0] = False, RETRY_MS
    for _ in range(2):
        with pytest.raises(PrefixOfAnotherDatabase):
            _ = late.digest


def test_a_write_is_stamped_only_with_a_confirmed_digest() -> None:
    """What a writer stamps is never the provisional guess: while the database cannot be asked it
    raises (the write waits), once it answers it is checked at once, not after RETRY_MS."""
    binding, database, clock = MemoryBinding(), Database(SECOND), [0]
    binding.bind(FIRST)
    database.down = True
    late = stamp(database, binding, clock)
    assert late.digest == FIRST.digest, "a reader serves what the prefix vouches for"
    with pytest.raises(DatabaseUnavailable):
        late.confirmed()
    database.down = False
    with pytest.raises(PrefixOfAnotherDatabase):
        late.confirmed()  # the same clock: no RETRY_MS wait before the truth


def test_an_unbound_prefix_is_bound_by_the_first_confirmed_write() -> None:
    binding, database = MemoryBinding(), Database(FIRST)
    writer = stamp(database, binding, [0])
    assert writer.confirmed() == FIRST.digest and binding.bound() == FIRST
    assert writer.confirmed() == FIRST.digest and database.asked == 1
