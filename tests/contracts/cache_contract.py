"""What the modules of the :class:`service.ports.SnapshotCache` contract share: its base class (a
fresh, isolated backend per test, named by the subclass: in memory, fakeredis, the real Redis or a
local Redis Cluster), a small valid envelope, the key of a wavefront snapshot and a one-envelope write.

The real Redis is ``GRAPHRAG_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``). It is a hard
requirement: when it cannot be reached the tests fail (setup error naming the URL), never skip. Each
test works under its own key prefix (``graphrag-test:<uuid>:v1``) and deletes its keys afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from service.envelope import Envelope, SnapshotKey
from service.ports import SnapshotCache
from tests.contracts.backends import CacheBackend, backend_named
from tests.support import NOW_MS

MAX_LIMIT = 5_000
LAYERED_LIMITS = (2_500, 5_000)


def write(store: SnapshotCache, env: Envelope) -> bool:
    return store.write_many([env])[0]


def wf(note_id: int, seed: int = 0) -> SnapshotKey:
    return SnapshotKey(note_id, "wavefront", seed)


def envelope(note_id: int, generation: int, shows: list[int], *, seed: int = 0,
             strategy: str = "wavefront", limit: int = MAX_LIMIT, computed_at_ms: int = NOW_MS,
             config: str = "cfg") -> Envelope:
    """A small, valid envelope (its result is a stub: the store never looks inside)."""
    result = {"focusNote": {"uri": f"/n{note_id}"}, "relatedNotes": [{"uri": f"/n{i}"} for i in shows]}
    return Envelope(note_id=note_id, seed=seed, strategy=strategy, generation=generation,
                    computed_at_ms=computed_at_ms, as_of_ms=NOW_MS, max_token_limit=limit,
                    focus_tokens=10, related_tokens=tuple(5 for _ in shows),
                    depends_on=tuple(sorted({note_id, *shows})), config_hash=config,
                    result_json=orjson.dumps(result))


class CacheContract:
    """The base of every cache contract; subclasses name their backend (``memory``, ``fakeredis``,
    ``redis`` or ``cluster``)."""

    backend_name = ""

    @pytest.fixture
    def backend(self) -> Iterator[CacheBackend]:
        with backend_named(self.backend_name) as backend:
            yield backend

    @pytest.fixture
    def store(self, backend: CacheBackend) -> Any:
        self.backend = backend
        return backend.cache

    # -- helpers ----------------------------------------------------------------------------------
    def assert_index_matches(self, _: Any = None) -> None:
        """Every reverse-index set equals what the stored snapshots' ``dependsOn`` say, no more."""
        assert self.backend.index_mismatches() == {}
