# mypy: disable-error-code="no-untyped-call,attr-defined,untyped-decorator"
"""Prototype evidence for Redis Cluster with the pinned redis-py 8.1.0, kombu 5.7.0, celery-redbeat.

Each test proves one claim the scale-out plan relies on, against a real local 3-primary cluster
(one per session, :mod:`tests.services.plugin`); RabbitMQ's claims are in ``test_prototypes_amqp``.

a. Lua: keys sharing one hash tag run; keys in two slots are refused by the *client* before sending;
   an undeclared key of another slot fails on the server. ``ClusterPipeline.evalsha`` is blocked, but
   ``execute_command("EVALSHA", ...)`` routes by the first key; NOSCRIPT comes back as a reply and
   ``script_load`` loads on every primary.
b. A non-transactional cluster pipeline groups commands per node, writes every node's batch, then
   reads node by node: in order per node, no order across nodes; replies come back in call order.
c. MGET across slots is refused; ``mget_nonatomic`` or per-slot MGETs grouped with ``key_slot``.
d. redis-py's Lock, SCAN over every primary, hash-tagged sorted sets, untagged INCR all work.
e. fakeredis has no cluster mode and accepts cross-slot commands: only the real cluster catches them.
g. kombu has no Redis Cluster transport (the broker stays a plain Redis or RabbitMQ); RedBeat can
   keep its schedule on the cluster.
"""

from __future__ import annotations

import time
import types
import uuid
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import redis
from celery import Celery
from celery.schedules import crontab
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kombu import Connection
from redbeat.schedulers import RedBeatScheduler, acquire_distributed_beat_lock
from redis.cluster import RedisCluster, key_slot
from redis.exceptions import (
    ClusterCrossSlotError,
    CrossSlotTransactionError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    ResponseError,
)

from storage.redis.keys import Keys
from storage.redis.scripts import DIRTY_DONE_LUA, DIRTY_TAKE_LUA
from tests.services import ServiceUnavailable
from tests.services.measure import measure
from tests.services.redis_cluster import ClusterInfo, redis_cluster

PAIR_LUA = "return {KEYS[1], KEYS[2], redis.call('INCR', KEYS[1])}"
GET_ARGV_LUA = "return redis.call('GET', ARGV[1])"
NOW_US_LUA = "local t = redis.call('TIME') return t[1] * 1000000 + t[2]"
BUSY_LUA = """
local function now() local t = redis.call('TIME') return t[1] * 1000000 + t[2] end
local start = now()
while now() - start < tonumber(ARGV[1]) do end
return {start, now()}
"""


def on_other_nodes(rc: RedisCluster, prefix: str, count: int) -> list[str]:
    """``count`` keys ``<prefix>:n:{i}`` owned by ``count`` different primaries."""
    found: dict[str, str] = {}
    for i in range(10_000):
        key = f"{prefix}:n:{{{i}}}"
        found.setdefault(rc.get_node_from_key(key).name, key)
        if len(found) == count:
            return list(found.values())
    raise AssertionError("the cluster has fewer primaries than expected")


# -- a. Lua scripts -------------------------------------------------------------------------------
def test_script_with_keys_of_one_hash_tag_runs(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    script = cluster_client.register_script(PAIR_LUA)
    keys = [f"{cluster_prefix}:a:{{7}}", f"{cluster_prefix}:b:{{7}}"]
    assert script(keys=keys) == [k.encode() for k in keys] + [1]
    assert script(keys=keys)[2] == 2


def test_script_with_keys_in_two_slots_is_refused_before_sending(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    script = cluster_client.register_script(PAIR_LUA)
    keys = [f"{cluster_prefix}:a:{{7}}", f"{cluster_prefix}:a:{{8}}"]
    with pytest.raises(RedisClusterException, match="all keys must map to the same key slot"):
        script(keys=keys)
    assert cluster_client.get(keys[0]) is None  # nothing ran


def test_script_reading_an_undeclared_key_works_only_within_its_slot(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    script = cluster_client.register_script(GET_ARGV_LUA)
    cluster_client.set(f"{cluster_prefix}:x:{{7}}", b"same-slot")
    assert script(keys=[f"{cluster_prefix}:k:{{7}}"], args=[f"{cluster_prefix}:x:{{7}}"]) == b"same-slot"
    with pytest.raises(ResponseError, match="non local key"):
        script(keys=[f"{cluster_prefix}:k:{{7}}"], args=[f"{cluster_prefix}:x:{{8}}"])


def test_pipeline_evalsha_needs_execute_command_and_reloads_after_noscript(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    script = cluster_client.register_script(PAIR_LUA)
    pipe = cluster_client.pipeline(transaction=False)
    with pytest.raises(RedisClusterException, match="evalsha is blocked"):
        pipe.evalsha(script.sha, 2, "a", "b")
    with pytest.raises(RedisClusterException, match="evalsha is blocked"):
        script(keys=[f"{cluster_prefix}:a:{{1}}", f"{cluster_prefix}:b:{{1}}"], client=pipe)

    def run() -> list[Any]:
        with cluster_client.pipeline(transaction=False) as p:
            for i in range(12):
                p.execute_command("EVALSHA", script.sha, 2, f"{cluster_prefix}:a:{{{i}}}",
                                  f"{cluster_prefix}:b:{{{i}}}")
            replies: list[Any] = p.execute(raise_on_error=False)
            return replies

    cluster_client.script_flush()  # every primary forgets every script
    assert all(isinstance(r, NoScriptError) for r in run())
    assert cluster_client.script_load(script.script) == script.sha  # sent to every primary
    assert cluster_client.script_exists(script.sha) == [True]
    assert [r[2] for r in run()] == [1] * 12  # the NOSCRIPT round did not run anything
    cluster_client.script_flush()
    assert script(keys=[f"{cluster_prefix}:a:{{0}}", f"{cluster_prefix}:b:{{0}}"])[2] == 2  # reloads


# -- b. pipelines -----------------------------------------------------------------------------------
def test_pipeline_over_many_slots_replies_in_call_order(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    keys = [f"{cluster_prefix}:p:{{{i}}}" for i in range(300)]
    assert len({cluster_client.get_node_from_key(k).name for k in keys}) == 3
    with cluster_client.pipeline(transaction=False) as pipe:
        for i, key in enumerate(keys):
            pipe.set(key, i).incrby(key, 1000).get(key)
        replies = pipe.execute()
    assert replies == [r for i in range(300) for r in (True, 1000 + i, str(1000 + i).encode())]


def test_pipeline_runs_in_order_per_node_but_not_across_nodes(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    slow, fast = on_other_nodes(cluster_client, cluster_prefix, 2)
    busy_us = 300_000
    with cluster_client.pipeline(transaction=False) as pipe:
        pipe.execute_command("EVAL", BUSY_LUA, 1, slow, busy_us)  # position 0, node A: busy 300 ms
        pipe.execute_command("EVAL", NOW_US_LUA, 1, fast)  # position 1, node B
        pipe.execute_command("EVAL", NOW_US_LUA, 1, slow)  # position 2, node A again
        (slow_start, slow_end), fast_at, slow_again_at = pipe.execute()
    assert slow_end - slow_start >= busy_us
    assert fast_at < slow_end  # node B did not wait for node A's earlier command
    assert slow_again_at >= slow_end  # node A ran its own commands in pipeline order


def test_pipeline_errors_in_place_or_first_raised_after_everything_ran(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    bad, good = f"{cluster_prefix}:e:{{1}}", f"{cluster_prefix}:e:{{2}}"
    with cluster_client.pipeline(transaction=False) as pipe:
        replies = pipe.set(bad, "text").incr(bad).set(good, 1).execute(raise_on_error=False)
    assert replies[0] is True and replies[2] is True and isinstance(replies[1], ResponseError)
    cluster_client.delete(good)
    with cluster_client.pipeline(transaction=False) as pipe:
        pipe.set(bad, "text").incr(bad).set(good, 2)
        with pytest.raises(ResponseError, match=r"Command # 2 \(INCRBY"):
            pipe.execute()
    assert cluster_client.get(good) == b"2"  # commands after the failing one still ran


def test_pipeline_with_a_cross_slot_multikey_command_sends_nothing(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    first = f"{cluster_prefix}:m:{{1}}"
    with cluster_client.pipeline(transaction=False) as pipe:
        pipe.set(first, 1)
        pipe.execute_command("MGET", first, f"{cluster_prefix}:m:{{2}}")
        with pytest.raises(RedisClusterException, match="same key slot"):
            pipe.execute(raise_on_error=False)
    assert cluster_client.get(first) is None
    with cluster_client.pipeline(transaction=True) as tx:
        tx.set(first, 1).set(f"{cluster_prefix}:m:{{2}}", 2)
        with pytest.raises(CrossSlotTransactionError):
            tx.execute()


# -- c. MGET and slots ------------------------------------------------------------------------------
def test_mget_across_slots_is_refused_and_mget_nonatomic_splits(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    keys = [f"{cluster_prefix}:g:{{{i}}}" for i in range(50)]
    with pytest.raises(RedisClusterException, match="same key slot"):
        cluster_client.mget(keys)
    cluster_client.mset_nonatomic({k: k for k in keys[::2]})
    assert cluster_client.mget_nonatomic(keys) == [k.encode() if i % 2 == 0 else None
                                                   for i, k in enumerate(keys)]
    with pytest.raises(RedisClusterException, match="mget is blocked"):
        cluster_client.pipeline().mget(keys[:1])


def test_every_key_of_a_note_shares_one_slot(cluster_client: RedisCluster) -> None:
    keys, note = Keys("p"), 4242
    names = [keys.snapshot(note, "wavefront", 0), keys.snapshot(note, "layered", 0, 2000),
             keys.generation(note), keys.dep(note), keys.shows(note), keys.touched(note),
             keys.lock(note, "wavefront", 0), keys.refresh(note)]
    server = cluster_client.cluster_keyslot(names[0])
    assert {cluster_client.keyslot(n) for n in names} == {key_slot(b"4242")} == {server}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(min_value=0, max_value=10**9), max_size=60),
       st.sets(st.integers(min_value=0, max_value=59)))
def test_mget_grouped_by_slot_equals_single_gets(cluster_client: RedisCluster, ids: list[int],
                                                  stored: set[int]) -> None:
    keys = Keys(f"test:{uuid.uuid4().hex[:12]}")
    names = [keys.touched(i) for i in ids]
    for at in stored & set(range(len(ids))):
        cluster_client.set(names[at], at)
    by_slot: dict[int, list[str]] = {}
    for name in dict.fromkeys(names):
        by_slot.setdefault(key_slot(name.encode()), []).append(name)
    with cluster_client.pipeline(transaction=False) as pipe:
        for group in by_slot.values():
            pipe.execute_command("MGET", *group)
        values = dict(zip((n for g in by_slot.values() for n in g),
                          (v for reply in pipe.execute() for v in reply), strict=True))
    assert [values[n] for n in names] == [cluster_client.get(n) for n in names]
    for name in set(names):
        cluster_client.delete(name)


# -- d. locks, SCAN, sorted sets, counters ---------------------------------------------------------
def test_redis_lock_on_a_cluster(cluster_client: RedisCluster, cluster_prefix: str) -> None:
    name = Keys(cluster_prefix).lock(9, "wavefront", 0)
    lock = cluster_client.lock(name, timeout=2, thread_local=False)
    rival = cluster_client.lock(name, timeout=2)
    assert lock.acquire(blocking=False) and not rival.acquire(blocking=False)
    assert lock.extend(3) and 2_000 < cluster_client.pttl(name) <= 5_000
    assert lock.reacquire() and cluster_client.pttl(name) <= 2_000
    lock.release()
    assert rival.acquire(blocking=False) and rival.owned() and not lock.owned()
    rival.release()


def test_scan_iter_visits_every_primary(cluster_client: RedisCluster, cluster_prefix: str) -> None:
    keys = {f"{cluster_prefix}:s:{{{i}}}".encode() for i in range(200)}
    cluster_client.mset_nonatomic(dict.fromkeys(keys, b"1"))
    assert len({cluster_client.get_node_from_key(k).name for k in keys}) == 3
    assert set(cluster_client.scan_iter(match=f"{cluster_prefix}:s:*", count=50)) == keys


def test_sharded_dirty_sets_leased_by_two_workers_at_once(
        cluster_client: RedisCluster, cluster_prefix: str) -> None:
    shards = 8
    keys = Keys(cluster_prefix)
    shard_keys = [[*(keys.dirty(s, lane) for lane in ("urgent", "near", "wide")),
                   keys.dirty_leases(s)] for s in range(shards)]
    assert len({cluster_client.get_node_from_key(k[2]).name for k in shard_keys}) > 1
    for note in range(100):
        cluster_client.zadd(shard_keys[note % shards][2], {str(note): 1000 + note})
    take = cluster_client.register_script(DIRTY_TAKE_LUA)
    done = cluster_client.register_script(DIRTY_DONE_LUA)
    for s in range(shards):  # two workers take from the same shard: never the same ids
        first, second = (take(keys=shard_keys[s], args=["+inf", 3, "123", 5_000]) for _ in range(2))
        assert len(first) == len(second) == 6 and not set(first[::2]) & set(second[::2])
        assert done(keys=shard_keys[s], args=first + second) == 6
        assert cluster_client.hlen(shard_keys[s][3]) == 0  # done let the leases go
    assert sum(cluster_client.zcard(k[2]) for k in shard_keys) == 100 - 6 * shards


def test_incr_of_an_untagged_key(cluster_client: RedisCluster, cluster_prefix: str) -> None:
    seq = Keys(cluster_prefix).seq()
    assert [cluster_client.incr(seq) for _ in range(3)] == [1, 2, 3]


# -- e. fakeredis ---------------------------------------------------------------------------------
def test_fakeredis_has_no_cluster_mode_and_accepts_cross_slot_commands() -> None:
    fake = fakeredis.FakeRedis()
    assert not [name for name in dir(fakeredis) if "cluster" in name.lower()]
    with pytest.raises(ResponseError, match="unknown command"):
        fake.execute_command("CLUSTER", "SLOTS")
    fake.set("k:{1}", b"1")
    fake.set("k:{2}", b"2")
    assert fake.mget("k:{1}", "k:{2}") == [b"1", b"2"]  # a real cluster refuses this
    cross = fake.register_script("return redis.call('GET', KEYS[1]) .. redis.call('GET', KEYS[2])")
    assert cross(keys=["k:{1}", "k:{2}"]) == b"12"


# -- g. kombu and RedBeat on a cluster ------------------------------------------------------------
def test_kombu_cannot_use_a_redis_cluster_as_broker(redis_cluster_info: ClusterInfo) -> None:
    with pytest.raises(KeyError, match="No such transport"):
        Connection("rediscluster://127.0.0.1:1").connect()
    for url in redis_cluster_info.urls:  # whichever node it is given, a queue's keys span slots
        with Connection(url, connect_timeout=2) as conn, pytest.raises(
                (MovedError, ClusterCrossSlotError)):
            queue = conn.SimpleQueue(f"realtime-{uuid.uuid4().hex[:6]}")
            queue.put({"n": 1})
            queue.get(timeout=1).ack()


def test_redbeat_keeps_its_schedule_on_the_cluster(
        redis_cluster_info: ClusterInfo, cluster_client: RedisCluster, cluster_prefix: str) -> None:
    app = Celery("beat", broker="memory://", set_as_current=False)
    app.conf.update(redbeat_redis_url=redis_cluster_info.startup_url,
                    redbeat_redis_options={"cluster": True, "socket_timeout": 5},
                    redbeat_key_prefix=f"{cluster_prefix}:redbeat:", redbeat_lock_timeout=30,
                    beat_schedule={"nightly": {"task": "t", "schedule": crontab(hour=3, minute=0)}})
    scheduler = RedBeatScheduler(app=app, lock_key=f"{cluster_prefix}:redbeat::lock")
    acquire_distributed_beat_lock(sender=types.SimpleNamespace(scheduler=scheduler))
    try:
        assert 0 < scheduler.tick() <= 300 and scheduler.lock.owned()
        assert cluster_client.zcard(f"{cluster_prefix}:redbeat::schedule") >= 1
    finally:
        scheduler.close()
    assert not cluster_client.exists(f"{cluster_prefix}:redbeat::lock")


# -- fixtures fail, never skip; figures ---------------------------------------------------------
def test_cluster_fixture_fails_with_the_cause(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRAG_TEST_REDIS_SERVER", "/bin/false")
    with pytest.raises(ServiceUnavailable, match="exited with code 1"), redis_cluster(tmp_path):
        pass
    assert list(tmp_path.iterdir()) == []


def test_cluster_against_single_redis_figures(cluster_client: RedisCluster, cluster_prefix: str) -> None:
    single = redis.Redis(socket_timeout=5, socket_connect_timeout=2)
    try:
        single.ping()
    except redis.ConnectionError as err:
        pytest.fail(f"the single Redis on 127.0.0.1:6379 is required for the comparison ({err})",
                    pytrace=False)
    started = time.monotonic()
    try:
        local, spread = measure(single, cluster_prefix), measure(cluster_client, cluster_prefix)
    finally:
        for key in list(single.scan_iter(match=f"{cluster_prefix}:*", count=1000)):
            single.delete(key)
        single.close()
    print(f"\nGET p50: single {local.get_p50_us:.0f} us, cluster {spread.get_p50_us:.0f} us; "
          f"1000-GET pipeline: single {local.pipeline_ms:.1f} ms, cluster {spread.pipeline_ms:.1f} ms")
    assert time.monotonic() - started < 30
