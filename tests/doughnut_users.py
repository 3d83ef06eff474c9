"""A Doughnut 2026 site with several users, their access tokens, and the HTTP reader in front of it.

Users: 1 owns "Own" (and "Bazaar", shared in the bazaar); 2 subscribes to "Own" and owns "Theirs",
whose note T links to Own's F; 3 and 4 are the members of circle 1, which owns "Circle"; 4 also owns
"Fourth", whose note M links to Circle's C; 5 owns "Stranger" and may read none of the others.
A links to B, C to D, Z (in the bazaar) to D; E is a deleted note of "Own" linking to B. Snapshots
are rebuilt into the real Redis; the app answers Doughnut's two paths with Doughnut's tokens
(``GRAPHRAG_READER_AUTH`` doughnut or both) through a token book whose clock the test moves.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from sqlalchemy import text
from sqlalchemy.engine import Engine

from graphrag import CharsCounter, Request, StrategyParams
from graphrag.wiki.focus.render import markdown_json
from graphrag.wiki.model import Viewer
from service.context import ContextService
from service.metrics import ReaderMetrics
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import rebuild
from service.sessions import SessionBook, Viewers
from service.users import TokenBook
from storage.database import open_engine
from storage.doughnut_web import DoughnutSessions
from storage.memory_wiki import MemoryWiki
from storage.profiles import open_source
from storage.profiles.admin_2026 import create_tables, insert_rows
from storage.redis.cache import RedisCache
from storage.redis.coordination import RedisCoordination
from tests.conftest import mariadb_database, url_string
from tests.redis.readers import real_redis, unique_prefix
from tests.storage.wiki_rows import table_rows
from tests.wiki_support import H
from worker.http.app import create_app
from worker.http.doughnut_paths import DoughnutAuth
from worker.http.public import create_public_app
from worker.http.server import health_of

__all__ = ["SHARED", "TOKENS", "Site", "site"]

STRATEGY, MAX_LIMIT, NOW_MS = "focus-context", 5_000, 1_790_000_000_000
SHARED = "the-main-apps-shared-token"
TOKEN_TTL_MS = 5_000
TOKENS = {"owner": 1, "subscriber": 2, "member3": 3, "member4": 4, "stranger": 5, "expired": 2,
          "revoked": 1}


def graph() -> tuple[MemoryWiki, dict[str, int]]:
    db = MemoryWiki()
    own, circle = db.notebook("Own", user=1), db.notebook("Circle", circle=1)
    bazaar, theirs = db.notebook("Bazaar", user=1), db.notebook("Theirs", user=2)
    fourth, stranger = db.notebook("Fourth", user=4), db.notebook("Stranger", user=5)
    db.circles[1] = {3, 4}
    db.subscriptions.add((2, own))
    db.bazaar.add(bazaar)
    notes = {name: db.note(name, book, None, H + f"about {name}") for name, book in (
        ("A", own), ("B", own), ("F", own), ("C", circle), ("D", circle), ("Z", bazaar),
        ("T", theirs), ("M", fourth), ("S", stranger))}
    notes["E"] = db.note("E", own, None, H + "gone", deleted=True)
    for source, target in (("A", "B"), ("C", "D"), ("Z", "D"), ("T", "F"), ("M", "C"), ("E", "B")):
        db.link(notes[source], notes[target])
    return db, notes


def _rows(db: MemoryWiki) -> dict[str, list[dict[str, Any]]]:
    rows = table_rows(db)
    rows["user"] = [{"id": u, "name": f"user {u}"} for u in range(1, 6)]
    owners = list(dict.fromkeys(nb.owner for nb in db.notebooks.values()))  # one ownership each
    rows["ownership"] = [{"id": i, "user_id": o.user_id, "circle_id": o.circle_id}
                         for i, o in enumerate(owners, 1)]
    for row in rows["notebook"]:
        row["ownership_id"] = owners.index(db.notebooks[row["id"]].owner) + 1
    expired = dt.datetime(2020, 1, 1)
    rows["user_token"] = [{"user_id": user, "token": f"tok-{name}", "label": name,
                           "expires_at": expired if name == "expired" else None}
                          for name, user in TOKENS.items()]
    return rows


@dataclass
class Site:
    engine: Engine
    service: ContextService
    cache: RedisCache
    notes: dict[str, int]
    now_ms: list[int] = field(default_factory=lambda: [0])
    lookups: list[str] = field(default_factory=list)

    def client(self, mode: str, *, verdict_ttl_ms: int | None = 0, **book: Any) -> TestClient:
        """The HTTP reader in ``mode``, its token book on this site's clock; ``verdict_ttl_ms``:
        how long another viewer's answer is remembered (0: never)."""
        app = create_app(self.reader(verdict_ttl_ms),
                         reader_token=None if mode == "doughnut" else SHARED,
                         registry=CollectorRegistry(),
                         health=health_of(self.cache, self.service.store),
                         doughnut=DoughnutAuth(mode, viewers=self.viewers(**book),
                                               shared_token=SHARED))
        return TestClient(app, raise_server_exceptions=False)

    def public(self, doughnut_url: str, **book: Any) -> TestClient:
        """The public listener's app, asking Doughnut at ``doughnut_url`` about web sessions."""
        auth = DoughnutAuth("both", viewers=self.viewers(doughnut_url, **book), shared_token=SHARED)
        return TestClient(create_public_app(self.reader(), auth), raise_server_exceptions=False)

    def reader(self, verdict_ttl_ms: int | None = 0) -> SnapshotReader:
        config = ReaderConfig(strategies=(STRATEGY,), seeds=(), max_token_limit=MAX_LIMIT)
        return SnapshotReader(self.service, self.cache, RedisCoordination(
            self.cache.redis, self.cache.keys), config, metrics=ReaderMetrics.create(),
            clock_ms=lambda: NOW_MS + 1_000, verdict_ttl_ms=verdict_ttl_ms)

    def viewers(self, doughnut_url: str | None = None, **book: Any) -> Viewers:
        """Doughnut's users: tokens on this site's clock, and web sessions asked of Doughnut."""
        source = self.service.store
        tokens = TokenBook(book.get("lookup", source.token_owner),  # type: ignore[attr-defined]
                           ttl_ms=TOKEN_TTL_MS, clock_ms=lambda: self.now_ms[0],
                           wall_ms=lambda: NOW_MS, on_lookup=self.lookups.append)
        sessions = None if doughnut_url is None else SessionBook(
            DoughnutSessions(doughnut_url), ttl_ms=TOKEN_TTL_MS, clock_ms=lambda: self.now_ms[0])
        return Viewers(tokens, sessions)

    def live(self, name: str, limit: int = 2000, viewer: Viewer | None = None,
             markdown: bool = False) -> bytes:
        deleted = name == "E"
        outcome = self.service.compute(Request(self.notes[name], None, limit, 0, limit,
                                               viewer=viewer, read_deleted=deleted), STRATEGY)
        return markdown_json(outcome.markdown()) if markdown else outcome.to_json()

    def sql(self, statement: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(text(statement))


@contextlib.contextmanager
def site() -> Iterator[Site]:
    db, notes = graph()
    with mariadb_database() as url, real_redis(prefix := unique_prefix()) as client:
        engine = open_engine(url_string(url))
        try:
            create_tables(engine)
            insert_rows(engine, _rows(db))
            service = ContextService(open_source(engine, "doughnut-2026"), CharsCounter(),
                                     StrategyParams())
            cache = RedisCache(client, prefix=prefix)
            report = rebuild(service, cache, service.store.live_ids_after(0, 100),
                             strategies=(STRATEGY,), seeds=(), max_token_limit=MAX_LIMIT,
                             now_ms=NOW_MS)
            assert report.errors == {}
            yield Site(engine, service, cache, notes)
        finally:
            engine.dispose()
