"""Focus-context snapshots in the real Redis, over a 2026 database in SQLite.

Random wiki graphs are loaded into SQLite and rebuilt into a real Redis (a private key prefix). For every
focus, both seed variants and a sweep of tokenLimits, the reader's answer equals a live compute byte for
byte, in JSON and in markdown; a fresh hit is one Redis MGET (the snapshot and its generation) and
runs no SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy.engine import Engine

from graphrag import CharsCounter, Request, StrategyParams
from graphrag.wiki.focus.strategy import WikiOutcome
from service.context import ContextService
from service.envelope import SnapshotKey
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from storage.database import open_engine
from storage.profiles import open_source
from storage.profiles.admin_2026 import create_tables, insert_rows
from storage.redis.cache import RedisCache
from storage.redis.coordination import RedisCoordination
from tests.redis.readers import CountingRedis, SqlCounter, real_redis, unique_prefix
from tests.storage.wiki_rows import random_graph, table_rows

pytestmark = pytest.mark.redis

STRATEGY, SEEDS, MAX_LIMIT, NOW_MS = "focus-context", (7,), 4_000, 1_790_000_000_000
SWEEP = (1, 2, 5, 6, 50, 99, 100, 101, 500, 1999, 2000, 2001, MAX_LIMIT)


@pytest.fixture(scope="module", params=[3])
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[Engine]:
    path: Path = tmp_path_factory.mktemp("focus") / "wiki.db"
    engine = open_engine(f"sqlite:///{path}")
    create_tables(engine)
    insert_rows(engine, table_rows(random_graph(request.param, notes=45)))
    yield engine
    engine.dispose()


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    with real_redis(prefix := unique_prefix()) as client:
        client.graphrag_prefix = prefix  # type: ignore[attr-defined]
        yield client


def test_every_token_limit_from_one_snapshot_equals_live_and_a_hit_is_one_mget(
        engine: Engine, client: redis.Redis) -> None:
    service = ContextService(open_source(engine, "doughnut-2026"), CharsCounter(), StrategyParams())
    counted = CountingRedis(client)
    cache = RedisCache(counted, prefix=client.graphrag_prefix)  # type: ignore[attr-defined]
    foci = [i for i in service.store.live_ids_after(0, 10_000)]
    report = rebuild(service, cache, foci, strategies=(STRATEGY,), seeds=SEEDS,
                     max_token_limit=MAX_LIMIT, now_ms=NOW_MS)
    assert report.errors == {}
    readable = [f for f in foci if cache.read(SnapshotKey(f, STRATEGY, None)) is not None]
    assert len(readable) >= len(foci) * 2 // 3  # the rest have no notebook: no viewer may read them
    config = ReaderConfig(strategies=(STRATEGY,), seeds=SEEDS, max_token_limit=MAX_LIMIT)
    reader = SnapshotReader(service, cache, RedisCoordination(counted, cache.keys), config,
                            clock_ms=lambda: NOW_MS + 1_000)
    sql = SqlCounter(engine)
    try:
        for focus in readable[:20]:
            for seed in (None, *SEEDS):
                for limit in SWEEP:
                    counted.calls.clear()
                    served = reader.get(focus, token_limit=limit, seed=seed)
                    assert (served.source, counted.calls) == ("cache", ["mget"]), (focus, seed, limit)
                    markdown = reader.get(focus, token_limit=limit, seed=seed, fmt="markdown")
                    assert markdown.source == "cache"
                    sql.count, seen = 0, sql.count
                    want = _live(service, focus, seed, limit)
                    sql.count = seen
                    assert served.body == want.to_json(), (focus, seed, limit)
                    assert (markdown.text, markdown.body) == (want.markdown(), want.markdown_json())
        assert sql.count == 0, "a fresh hit runs no SQL"
    finally:
        sql.close()


def _live(service: ContextService, focus: int, seed: int | None, limit: int) -> WikiOutcome:
    outcome = service.compute(Request(focus, seed, limit, 0, limit), STRATEGY)
    assert isinstance(outcome, WikiOutcome)
    return outcome
