"""Least privilege (issue 6, item 5), against the real MariaDB (and Redis for the CLI).

A MariaDB user with nothing but ``SELECT ON <db>.note`` (unique name, dropped afterwards:
:mod:`tests.reliability.select_only_user`) runs every read path: the schema check, paging,
counting, the events' subtree and neighbour queries, every strategy (byte-identical to an
all-privileges user), a rebuild into Redis (fakeredis in-process, the real Redis under a unique key
prefix through the CLI), ``context``, ``compare`` and ``audit``. That secrets never show is
test_secrets_never_shown.py.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import fakeredis
import orjson
import pytest
import redis
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from graphrag import (
    CharsCounter,
    GraphRagError,
    GraphView,
    Need,
    NoteNotFound,
    Request,
    StrategyParams,
    strategy_names,
)
from service.context import ContextService
from service.events import record_events
from service.note_event import NoteEvent
from service.rebuild import rebuild
from storage.redis.cache import RedisCache as SnapshotStore
from storage.redis.queue import RedisDirtySet as DirtySet
from storage.sample import SAMPLE_FOCUS_IDS
from tests.conftest import url_string
from tests.redis.readers import snapshot_of
from tests.reliability.select_only_user import Restricted, redis_url
from tests.reliability.select_only_user import restricted as restricted  # a module fixture
from tests.reliability.support import (
    check_result,
    cli_env,
    figure,
    graphrag,
    scale,
    sized,
)
from tests.wiring import NoteStore

STRATEGIES = strategy_names("tree")

pytestmark = pytest.mark.mariadb

SCALE = scale()  # GRAPHRAG_RELIABILITY_SCALE: "ci" (default) or "full"
NOW_MS = 1_767_225_600_000
LIVE_FOCI = [f for name, f in SAMPLE_FOCUS_IDS.items() if name != "deleted"]
#: how many live notes the in-process rebuild covers (the CLI rebuild always takes --all)
REBUILD_NOTES = sized(ci=120, full=10_000)


def test_the_user_may_only_select_from_note(restricted: Restricted) -> None:
    with restricted.engine.connect() as conn:
        grants = [row[0] for row in conn.execute(text("SHOW GRANTS"))]
        assert len(grants) == 2, grants
        assert grants[0].startswith("GRANT USAGE ON *.*"), grants
        assert grants[1].startswith(f"GRANT SELECT ON `{restricted.url.database}`.`note`"), grants
        assert conn.execute(text("SELECT COUNT(*) FROM note")).scalar_one() > 300
    forbidden = [
        "INSERT INTO note (id, topic_constructor, created_at) VALUES (99999, 'x', NOW())",
        "UPDATE note SET topic_constructor = 'x' WHERE id = 1",
        "DELETE FROM note WHERE id = 1",
        "CREATE TABLE probe (id INT)",
        "CREATE TEMPORARY TABLE probe (id INT)",
        "DROP TABLE note",
        "ALTER TABLE note ADD COLUMN probe INT",
    ]
    for statement in forbidden:
        with restricted.engine.connect() as conn, pytest.raises(SQLAlchemyError, match="denied"):
            conn.execute(text(statement))


def test_the_store_reads_with_select_only(restricted: Restricted) -> None:
    ro, admin = restricted.store(), NoteStore(restricted.admin)
    ro.check_schema()
    ro.ping()
    assert ro.any_note()
    assert ro.count_live() == admin.count_live() == len(restricted.live_ids)
    paged: list[int] = []
    while page := ro.live_ids_after(paged[-1] if paged else 0, 50):
        paged += page
    assert paged == restricted.live_ids
    roots = {SAMPLE_FOCUS_IDS["monster_parent"], SAMPLE_FOCUS_IDS["deleted"]}
    assert ro.edit_scope(roots) == admin.edit_scope(roots)
    views = []
    for store in (ro, admin):
        view = GraphView()
        need = Need(notes=frozenset(LIVE_FOCI), children=frozenset(LIVE_FOCI),
                    inbound=frozenset(LIVE_FOCI), ancestors=frozenset(LIVE_FOCI),
                    rows=frozenset(LIVE_FOCI))
        store.load(view, need)
        views.append([(view.note(i), view.children(i)) for i in LIVE_FOCI])
    assert views[0] == views[1]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_computes_the_same_with_select_only(
    restricted: Restricted, strategy: str
) -> None:
    ro = ContextService(restricted.store(), CharsCounter(), StrategyParams())
    admin = ContextService(NoteStore(restricted.admin), CharsCounter(), StrategyParams())
    requests = [Request(f, 0, 5000, NOW_MS, 5000) for f in LIVE_FOCI]
    for request in requests:
        ours = ro.compute(request, strategy).to_json()
        assert ours == admin.compute(request, strategy).to_json()
        check_result(ours, request.focus_id)
    batch = ro.compute_many(requests, strategy).results
    assert all(not isinstance(o, GraphRagError) for o in batch.values())
    with pytest.raises(NoteNotFound):
        ro.compute(Request(SAMPLE_FOCUS_IDS["deleted"], 0, 5000, NOW_MS), strategy)


def _event_stores() -> tuple[SnapshotStore, DirtySet]:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    store = SnapshotStore(client, prefix=f"graphrag-lp:{uuid.uuid4().hex}:v1")
    return store, DirtySet(client, store.keys)


def test_events_resolve_with_select_only(restricted: Restricted) -> None:
    hub, parent = SAMPLE_FOCUS_IDS["hub"], SAMPLE_FOCUS_IDS["monster_parent"]
    events = [NoteEvent("note.updated", hub), NoteEvent("note.deleted", parent),
              NoteEvent("note.moved", SAMPLE_FOCUS_IDS["deep_leaf"], before_parent_id=parent,
                        after_parent_id=hub)]
    affected = []
    for notes in (restricted.store(), NoteStore(restricted.admin)):
        store, dirty = _event_stores()
        affected.append(record_events(events, notes, store, dirty, sibling_radius=2, now_ms=NOW_MS))
    assert affected[0] == affected[1] and {hub, parent} <= affected[0]


def test_a_rebuild_into_redis_works_with_select_only(restricted: Restricted) -> None:
    ids = [*restricted.live_ids[:REBUILD_NOTES], SAMPLE_FOCUS_IDS["deleted"]]
    store, _ = _event_stores()
    service = ContextService(restricted.store(), CharsCounter(), StrategyParams())
    started = time.perf_counter()
    report = rebuild(service, store, ids, strategies=STRATEGIES, seeds=(0,), max_token_limit=5000,
                     layered_limits=(2500, 5000), now_ms=NOW_MS)
    assert report.errors == {}, report.errors
    assert report.count == (len(ids) - 1) * 4  # wavefront, relationship-bfs, layered x 2 limits
    admin = ContextService(NoteStore(restricted.admin), CharsCounter(), StrategyParams())
    for focus in ids[:: max(1, len(ids) // 10)][:-1] or ids[:1]:
        env = snapshot_of(store, focus, "wavefront", 0)
        assert env is not None, focus
        expected = admin.compute(Request(focus, 0, 5000, NOW_MS, 5000), "wavefront")
        assert orjson.dumps(env.result) == expected.to_json()
    assert snapshot_of(store, SAMPLE_FOCUS_IDS["deleted"], "wavefront", 0) is None
    figure("SELECT-only rebuild (in-process)",
           f"{report.count} snapshots of {len(ids) - 1} notes in {time.perf_counter() - started:.1f} s")


@pytest.mark.redis
def test_the_cli_reads_and_rebuilds_with_select_only(restricted: Restricted) -> None:
    prefix = f"graphrag-reliability:{uuid.uuid4().hex}:v1"
    password = restricted.url.password
    assert password
    env = cli_env(GRAPHRAG_DATABASE_URL=url_string(restricted.url), GRAPHRAG_REDIS_URL=redis_url(),
                  GRAPHRAG_REDIS_PREFIX=prefix, GRAPHRAG_REDIS_TIMEOUT_MS="2000",
                  GRAPHRAG_STRATEGIES="wavefront,layered,relationship-bfs",
                  GRAPHRAG_TOKEN_COUNTER="chars")
    client = redis.Redis.from_url(redis_url(), socket_timeout=5)
    hub = str(SAMPLE_FOCUS_IDS["hub"])
    try:
        built = graphrag("rebuild", "--all", env=env, timeout_s=300)
        assert built.returncode == 0, built.stderr.decode()[-2000:]
        assert "0 errors" in built.stderr.decode()
        reads = {
            "snapshot": ("context", hub),
            "live": ("context", hub, "--live"),
            "compare": ("compare", hub, str(SAMPLE_FOCUS_IDS["link_note"]), "--format", "json"),
            "audit": ("audit", "--sample", "20"),
        }
        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = {name: pool.submit(graphrag, *args, env=env) for name, args in reads.items()}
            done = {name: run.result() for name, run in runs.items()}
        for name, proc in done.items():
            assert proc.returncode == 0, (name, proc.stderr.decode()[-2000:])
        check_result(done["snapshot"].stdout.strip(), int(hub))
        check_result(done["live"].stdout.strip(), int(hub))
        assert "sampled 20 snapshots" in done["audit"].stdout.decode()
        for proc in [built, *done.values()]:
            assert password not in (proc.stdout + proc.stderr).decode(errors="replace")
        assert client.exists(f"{prefix}:snap:{{{hub}}}:layered:0:2500")
    finally:
        stale = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if stale:
            client.delete(*stale)
        client.close()
