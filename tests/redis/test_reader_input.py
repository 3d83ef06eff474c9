"""The reader on the Redis adapters (fakeredis, the real Redis, a local Redis Cluster), continued:
requests it refuses. Bad input names the parameter at fault, and unknown and deleted notes are not
found under every strategy; neither computes anything nor writes a key.
"""

from __future__ import annotations

from typing import Any

import pytest

from graphrag import InvalidParameter, NoteNotFound
from service.reader import SnapshotReader
from storage.redis.cache import RedisCache
from tests.redis.reader_contract import (
    MAX_LIMIT,
    STRATEGIES,
    OnFakeRedis,
    OnRealRedis,
    OnRedisCluster,
    ReaderContract,
)
from tests.redis.readers import DELETED_LINK, DELETED_NOTE, UNKNOWN_NOTE, CountingService


class InputContract(ReaderContract):
    """Bad input, unknown and deleted notes."""

    # -- bad input --------------------------------------------------------------------------------
    @pytest.mark.parametrize(("args", "parameter"), [
        ({"note_id": -1}, "noteId"),
        ({"note_id": "10"}, "noteId"),
        ({"note_id": 1.5}, "noteId"),
        ({"note_id": True}, "noteId"),
        ({"note_id": None}, "noteId"),
        ({"token_limit": 0}, "tokenLimit"),
        ({"token_limit": -1}, "tokenLimit"),
        ({"token_limit": 10**9}, "tokenLimit"),
        ({"token_limit": 2.5}, "tokenLimit"),
        ({"token_limit": "300"}, "tokenLimit"),
        ({"token_limit": True}, "tokenLimit"),
        ({"strategy": "nope"}, "strategy"),
        ({"strategy": ""}, "strategy"),
        ({"strategy": "Wavefront"}, "strategy"),
        ({"seed": 99}, "seed"),
        ({"seed": -1}, "seed"),
        ({"seed": "0"}, "seed"),
    ])
    def test_bad_input_names_the_parameter(
        self, args: dict[str, Any], parameter: str, store: RedisCache, counting: CountingService,
        reader: SnapshotReader,
    ) -> None:
        call: dict[str, Any] = {"note_id": 10, **args}
        note_id = call.pop("note_id")
        with pytest.raises(InvalidParameter) as caught:
            reader.get(note_id, **call)
        assert caught.value.parameter == parameter
        assert counting.calls == 0
        assert not list(store.redis.scan_iter(match=f"{store.keys.prefix}:*"))

    @pytest.mark.parametrize("seed", [0.0, False])
    def test_a_seed_that_is_not_an_int_is_invalid(
        self, seed: Any, store: RedisCache, reader: SnapshotReader
    ) -> None:
        with pytest.raises(InvalidParameter) as caught:
            reader.get(10, seed=seed)
        assert caught.value.parameter == "seed"

    @pytest.mark.parametrize("note_id", [UNKNOWN_NOTE, DELETED_NOTE, DELETED_LINK])
    def test_unknown_and_deleted_notes_are_not_found(
        self, note_id: int, store: RedisCache, reader: SnapshotReader
    ) -> None:
        for strategy in STRATEGIES:
            with pytest.raises(NoteNotFound):
                reader.get(note_id, strategy=strategy, seed=0)
        with pytest.raises(NoteNotFound):
            reader.get(note_id, token_limit=5 * MAX_LIMIT)
        assert not self.snapshot_keys(store)
        assert not list(store.redis.scan_iter(match=f"{store.keys.prefix}:lock:*"))


class TestReaderFakeRedis(OnFakeRedis, InputContract):
    pass


@pytest.mark.redis
class TestReaderRealRedis(OnRealRedis, InputContract):
    pass


@pytest.mark.redis
class TestReaderRedisCluster(OnRedisCluster, InputContract):
    pass
