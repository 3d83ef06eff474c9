"""The hot reads' own connection (storage.redis.client.Pinned, RedisCache.pinned) on the real Redis:
one connection held across reads, made again after Redis dropped it, and never shared with a forked
child."""

from __future__ import annotations

import os
import uuid

import pytest

from service.envelope import SnapshotKey
from storage.redis.cache import RedisCache
from storage.redis.client import build_client
from tests.redis.readers import real_redis, redis_url

pytestmark = pytest.mark.redis

KEY = SnapshotKey(7, "wavefront", 0)


def _client_ids(client: object, name: str) -> set[int]:
    listed = client.client_list()  # type: ignore[attr-defined]
    return {int(c["id"]) for c in listed if c.get("name") == name}


def test_a_pinned_cache_reads_through_one_held_connection_and_reconnects() -> None:
    prefix = f"graphrag-test:{uuid.uuid4().hex}:v1"
    name = f"pinned-{uuid.uuid4().hex[:8]}"
    with real_redis(prefix) as admin:
        client = build_client(redis_url() + f"?client_name={name}", timeout_ms=2_000)
        cache = RedisCache(client, prefix=prefix)
        pinned = cache.pinned()
        admin.set(cache.keys.snapshot(7, "wavefront", 0), b"stored")
        admin.set(cache.keys.generation(7), b"3")
        assert pinned.read_current(KEY) == (b"stored", 3)
        held = _client_ids(admin, name)
        for _ in range(20):
            assert pinned.read_current(KEY) == (b"stored", 3)
        assert _client_ids(admin, name) == held and len(held) == 1, "not one held connection"
        admin.client_kill_filter(_id=str(next(iter(held))))
        assert pinned.read_current(KEY) == (b"stored", 3)  # reconnected (one quick retry)
        assert _client_ids(admin, name) - held, "the read after the kill used no new connection"
        client.close()


def test_a_forked_child_reads_through_a_connection_of_its_own() -> None:
    """A child sharing its parent's socket would read the parent's replies: after a fork the held
    connection is dropped in the child and made anew."""
    prefix = f"graphrag-test:{uuid.uuid4().hex}:v1"
    name = f"pinned-{uuid.uuid4().hex[:8]}"
    with real_redis(prefix) as admin:
        client = build_client(redis_url() + f"?client_name={name}", timeout_ms=2_000)
        pinned = RedisCache(client, prefix=prefix).pinned()
        admin.set(pinned.keys.generation(7), b"5")
        assert pinned.read_current(KEY) == (None, 5)
        parents = _client_ids(admin, name)
        child = os.fork()
        if child == 0:
            ok = pinned.read_current(KEY) == (None, 5) and bool(_client_ids(admin, name) - parents)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the child read through its parent's socket"
        assert pinned.read_current(KEY) == (None, 5)
        client.close()
