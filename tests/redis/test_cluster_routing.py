"""On a Redis Cluster the adapters route their script calls themselves: no extra round trip each.

redis-py 8 finds the node of an ``EVALSHA`` by asking a server ``COMMAND GETKEYS`` (the command has
"movable keys"), one synchronous round trip per script call inside every pipeline, unless the caller
names the node (:func:`storage.redis.client.evalsha`). The servers' own command statistics show
whether that happens: snapshot writes, generation bumps, edit stamps, dirty-set adds, takes and
dones, and a focus deletion on the shared local 3-primary cluster must not raise the count of
``COMMAND GETKEYS`` on any node, while the scripts themselves did run there. And where order
matters across nodes, a round trip is added on purpose: a write's second reverse-index pass waits
for its scripts' replies.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from service.envelope import SnapshotKey
from storage.redis.scripts import INDEX_LUA, WRITE_LUA
from tests.contracts.backends import RedisBackend, backend_named
from tests.contracts.cache_contract import envelope
from tests.services.redis_cluster import shared_cluster
from tests.support import NOW_MS

pytestmark = pytest.mark.redis


def _calls(stat: str) -> int:
    """Calls of one command (``INFO commandstats`` name) summed over every primary of the cluster."""
    total = 0
    for url in shared_cluster().urls:
        with redis.Redis.from_url(url) as node:
            total += int(node.info("commandstats").get(f"cmdstat_{stat}", {}).get("calls", 0))
    return total


@pytest.fixture
def cluster() -> Iterator[Any]:
    with backend_named("cluster") as backend:
        assert isinstance(backend, RedisBackend)
        yield backend


def test_script_calls_on_a_cluster_ask_no_server_for_their_keys(cluster: Any) -> None:
    getkeys, scripts = _calls("command|getkeys"), _calls("evalsha")
    foci = list(range(1, 41))
    accepted = cluster.cache.write_many([envelope(f, 1, [f + 100, f + 200]) for f in foci])
    cluster.cache.bump_generations(foci)
    cluster.cache.stamp_touched(foci)
    cluster.dirty.add(foci, now_ms=NOW_MS)
    taken = cluster.dirty.take(len(foci), settled_before_ms=NOW_MS + 1)
    cluster.dirty.done(taken)
    cluster.cache.delete_focus(foci[0])
    assert accepted == [True] * len(foci) and len(taken) == len(foci)
    assert _calls("evalsha") - scripts >= 3 * len(foci)  # writes, index updates, bumps, stamps, ...
    assert _calls("command|getkeys") == getkeys


_SCRIPTS = {hashlib.sha1(lua.encode()).hexdigest(): name
            for name, lua in (("write", WRITE_LUA), ("index", INDEX_LUA))}


def _kind(args: tuple[Any, ...]) -> str:
    return _SCRIPTS.get(str(args[1]), "script") if str(args[0]).upper() == "EVALSHA" else "other"


def test_on_a_cluster_a_writes_second_index_pass_waits_for_its_scripts(
        cluster: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster pipeline keeps order per node only, so the second reverse-index pass of a write
    (step 3 in storage.redis.cache) goes in a round trip of its own, after the scripts answered."""
    cache, sent = cluster.cache, list[list[str]]()
    make = cache.redis.pipeline

    def recording(*args: Any, **kwargs: Any) -> Any:
        pipe, queued = make(*args, **kwargs), list[str]()
        queue, execute = pipe.execute_command, pipe.execute

        def record(*a: Any, **k: Any) -> Any:
            queued.append(_kind(a))
            return queue(*a, **k)

        def run(*a: Any, **k: Any) -> Any:
            sent.append(list(queued))
            return execute(*a, **k)

        pipe.execute_command, pipe.execute = record, run
        return pipe

    monkeypatch.setattr(cache.redis, "pipeline", recording)
    assert cache.write_many([envelope(f, 1, [f + 100, f + 200]) for f in (1, 2, 3)]) == [True] * 3
    writing = [kinds for kinds in sent if "write" in kinds]
    assert len(writing) == 1
    step_1_and_scripts = writing[0]
    assert step_1_and_scripts.index("index") < step_1_and_scripts.index("write")
    assert step_1_and_scripts[-1] == "write"  # nothing of step 3 in the same round trip
    step_3 = sent[sent.index(step_1_and_scripts) + 1]
    assert set(step_3) == {"index"}


def test_a_read_on_a_cluster_is_one_mget_on_the_notes_node(cluster: Any) -> None:
    getkeys, mgets = _calls("command|getkeys"), _calls("mget")
    generation = cluster.cache.bump_generations([7])[7]
    cluster.cache.write_many([envelope(7, generation, [8])])
    raw, current = cluster.cache.read_current(SnapshotKey(7, "wavefront", 0))
    assert raw is not None and current == generation
    assert _calls("mget") == mgets + 1
    assert _calls("command|getkeys") == getkeys
