"""The benchmark's Redis probe against the real Redis: raw reads, memory per kind, deleting a prefix,
claiming a database of its own for a broker. Each test works under a unique prefix (or in a
database it claimed) and leaves nothing behind; a missing Redis fails the test."""

from __future__ import annotations

import orjson
import pytest
import zstandard

from graphrag.core.errors import CacheUnavailable
from service.packing import pack
from storage.redis import probe
from tests.ports import free_port
from tests.redis.readers import real_redis, redis_url, unique_prefix

pytestmark = pytest.mark.redis

MARKER = "graphrag-test:probe-claim"


def _fill(client: object, prefix: str, counts: dict[str, int]) -> None:
    for kind, count in counts.items():
        for i in range(count):
            client.set(f"{prefix}:{kind}:{{{i}}}", orjson.dumps({"kind": kind, "i": i}))  # type: ignore[attr-defined]


def test_memory_by_kind_counts_every_key_of_each_kind_under_the_prefix() -> None:
    prefix, other = unique_prefix(), unique_prefix()
    with real_redis(prefix) as client, real_redis(other):
        counts = {"snap": 1203, "dep": 7, "gen": 1}  # more snapshots than one SCAN page
        _fill(client, prefix, counts)
        _fill(client, other, {"snap": 5})
        found = probe.memory_by_kind(client, prefix)
        assert {kind: keys for kind, (keys, _) in found.items()} == counts
        assert all(size_bytes >= 16 * keys for keys, size_bytes in found.values())


def test_get_latencies_time_each_key_and_fail_on_a_missing_one() -> None:
    prefix = unique_prefix()
    with real_redis(prefix) as client:
        _fill(client, prefix, {"snap": 3})
        keys = [f"{prefix}:snap:{{{i}}}" for i in (2, 0, 1, 0)]
        latencies = probe.get_latencies_us(client, keys)
        assert len(latencies) == len(keys) and all(us > 0 for us in latencies)
        with pytest.raises(ValueError):  # orjson.loads(None): the caller times keys it wrote
            probe.get_latencies_us(client, [f"{prefix}:snap:{{99}}"])


def test_packed_latencies_read_each_default_answer_through_one_decompressor() -> None:
    """A bare client's read of a packed value's default answer, a key at a time through one
    decompressor (as the bench interleaves it with the reader's reads), or several at once."""
    prefix = unique_prefix()
    result = orjson.dumps({"focusNote": {"title": "t" * 300}, "relatedNotes": []})
    with real_redis(prefix) as client:
        keys = [f"{prefix}:snap:{{{i}}}" for i in range(3)]
        for key in keys:
            client.set(key, pack({"noteId": 1}, result, b'{"trace": 1}'))
        one = zstandard.ZstdDecompressor()
        timed = [us for key in keys for us in probe.packed_latencies_us(client, [key],
                                                                         decompressor=one)]
        assert len(timed) == 3 and all(us > 0 for us in timed)
        assert len(probe.packed_latencies_us(client, keys)) == 3
        with pytest.raises(AttributeError):  # (a missing key: the caller times keys it wrote)
            probe.packed_latencies_us(client, [f"{prefix}:snap:{{99}}"], decompressor=one)


def test_unlink_prefix_removes_the_prefix_only() -> None:
    prefix, other = unique_prefix(), unique_prefix()
    with real_redis(prefix) as client, real_redis(other):
        _fill(client, prefix, {"snap": 1500, "gen": 2})
        _fill(client, other, {"snap": 3})
        assert probe.unlink_prefix(client, prefix) == 1502
        assert probe.memory_by_kind(client, prefix) == {}
        assert probe.memory_by_kind(client, other)["snap"][0] == 3


def test_a_claimed_database_is_empty_exclusive_and_flushed_on_release() -> None:
    databases = range(15, 7, -1)
    first = probe.claim_empty_database(redis_url(), databases, marker=MARKER)
    assert first is not None
    try:
        assert first.client.dbsize() == 1  # our marker only
        second = probe.claim_empty_database(redis_url(), databases, marker=MARKER)
        try:
            assert second is None or second.url != first.url
        finally:
            if second is not None:
                probe.release_database(second)
        first.client.rpush("realtime", b"m1", b"m2")
        first.client.rpush("realtime\x06\x163", b"m3")  # a kombu priority list
        first.client.rpush("bulk", b"m4")
        first.client.hset("unacked", "tag", b"m5")
        first.client.rpush("elsewhere", b"not ours")
        assert probe.pending_messages(first, ("realtime", "bulk")) == 5
    finally:
        probe.release_database(first)
    again = probe.connect(first.url)
    try:
        assert again.exists("realtime", "unacked", MARKER) == 0
    finally:
        probe.disconnect(again)


def test_an_unreachable_redis_is_cache_unavailable() -> None:
    with pytest.raises(CacheUnavailable):
        probe.connect(f"redis://127.0.0.1:{free_port()}/0", timeout_s=0.5)
