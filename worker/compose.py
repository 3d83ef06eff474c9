"""The composition root: settings in, wired objects out. Nothing below ``worker`` reads settings.

:class:`Wiring` builds, once per process (after fork), the adapters each port needs — the note
source of the configured schema profile, the Redis cache, dirty set, coordination and progress —
and the use cases over them (live compute, rebuild, reader).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from typing import Any

from graphrag import (
    CharsCounter,
    ConfigurationError,
    MemoCounter,
    OnePerNoteCounter,
    StrategyParams,
    TiktokenCounter,
    TokenCounter,
)
from graphrag.core.errors import CacheUnavailable, DatabaseUnavailable, GraphRagError
from graphrag.wiki.focus.types import FocusContextParams
from service.binding import DatabaseStamp
from service.carry import Carry
from service.context import ContextService
from service.drain import requeue
from service.feed import FeedGuard
from service.full_rebuild import rebuild_pieces
from service.metrics import ReaderMetrics
from service.ports import NoteSource, TokenOwner
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import RebuildReport, rebuild, rehearse
from service.sessions import SessionBook
from service.users import TokenBook
from storage.database import open_engine
from storage.encodings import load_cl100k
from storage.profiles import open_source
from storage.redis.binding import RedisBinding
from storage.redis.cache import RedisCache
from storage.redis.changes import RedisChanges
from storage.redis.client import build_client
from storage.redis.coordination import RedisCoordination
from storage.redis.keys import Keys
from storage.redis.positions import RedisAccessEpoch, RedisFeedHeartbeat
from storage.redis.progress import RedisProgress
from storage.redis.queue import RedisDirtySet
from worker.access_watch import AccessWatch
from worker.feed_watch import FeedWatch
from worker.settings import Settings

__all__ = ["Wiring", "build_counter", "build_source", "wall_ms"]


def wall_ms() -> int:
    """The wall clock in epoch milliseconds (read here, at the root, and passed down)."""
    return time.time_ns() // 1_000_000


def build_counter(name: str, settings: Settings) -> TokenCounter:
    """The token counter called ``name``; tiktoken's file is loaded offline and hash-checked, and
    its counts are remembered (``GRAPHRAG_TOKEN_MEMO_ENTRIES``; the others cost less than a lookup)."""
    if name == "chars":
        return CharsCounter()
    if name == "one-per-note":
        return OnePerNoteCounter()
    counter = TiktokenCounter(load_cl100k(settings.tiktoken_file).encode_ordinary)
    entries = settings.token_memo_entries
    return MemoCounter(counter, entries) if entries else counter


def build_source(settings: Settings) -> NoteSource:
    """The note source of ``GRAPHRAG_SCHEMA`` on ``GRAPHRAG_DATABASE_URL``."""
    engine = open_engine(settings.database_url, pool_size=settings.database_pool_size,
                         statement_timeout_ms=settings.database_statement_timeout_ms)
    return open_source(engine, settings.schema_name, in_chunk=settings.in_chunk)


def strategy_params(settings: Settings) -> StrategyParams:
    """The tuning the settings ask for (every choice is part of the snapshots' configHash)."""
    if settings.focus_context_dedupe == "doughnut":
        return StrategyParams()
    return StrategyParams(focus_context=FocusContextParams(dedupe_across_depths=True))


class Wiring:
    """Every adapter and use case of one process, built lazily from ``settings``.

    ``redis_client`` replaces the client the settings describe (the demo's in-process Redis).
    """

    def __init__(self, settings: Settings, *, redis_client: Any = None,
                 counter_name: str | None = None) -> None:
        self.settings, self._client, self._counter_name = settings, redis_client, counter_name

    @cached_property
    def source(self) -> NoteSource:
        return build_source(self.settings)

    @cached_property
    def service(self) -> ContextService:
        counter = build_counter(self._counter_name or self.settings.token_counter, self.settings)
        return ContextService(self.source, counter, strategy_params(self.settings),
                              database=lambda: self.stamp.digest, stamp=self.stamp.confirmed)

    def close(self) -> None:
        """Let go of the database's and Redis's connections this wiring opened."""
        if "source" in self.__dict__:
            engine = getattr(self.source, "engine", None)
            if engine is not None:
                engine.dispose()
        if self._client is None and "client" in self.__dict__:
            self.client.close()

    @cached_property
    def binding(self) -> RedisBinding:
        """The database the key prefix belongs to (service.binding)."""
        return RedisBinding(self.client, self.keys)

    @cached_property
    def stamp(self) -> DatabaseStamp:
        """This process's database digest, on every snapshot it writes and serves: checked against
        the prefix's binding by :meth:`check_binding` at start, else at first use."""
        return DatabaseStamp(lambda: self.source.identity(), self.binding,
                             clock_ms=lambda: time.monotonic_ns() // 1_000_000)

    def check_binding(self) -> None:
        """Refuse a key prefix of another database (PrefixOfAnotherDatabase, one line), at a
        process's start; when the database or Redis does not answer yet, it is checked at first
        use instead (a reader may start while the database is down)."""
        with contextlib.suppress(DatabaseUnavailable, CacheUnavailable):
            self.stamp.check()

    @cached_property
    def client(self) -> Any:
        return self._client or build_client(self.settings.redis_url,
                                            timeout_ms=self.settings.redis_timeout_ms,
                                            cluster=self.settings.redis_cluster)

    @cached_property
    def keys(self) -> Keys:
        return Keys(self.settings.redis_prefix)

    @cached_property
    def cache(self) -> RedisCache:
        s = self.settings
        return RedisCache(self.client, prefix=s.redis_prefix, soft_ttl_s=s.soft_ttl_s,
                          hard_ttl_s=s.hard_ttl_s)

    @cached_property
    def changes(self) -> RedisChanges:
        return RedisChanges(self.client, self.keys)

    @cached_property
    def dirty(self) -> RedisDirtySet:
        return RedisDirtySet(self.client, self.keys, shards=self.settings.dirty_shards)

    @cached_property
    def coordination(self) -> RedisCoordination:
        return RedisCoordination(self.client, self.keys)

    def progress(self, name: str = "nightly") -> RedisProgress:
        return RedisProgress(self.client, self.keys, name)

    def known_model(self) -> str | None:
        """The database's graph model, or None while it cannot be learnt (the database is down
        and GRAPHRAG_SCHEMA=auto)."""
        try:
            return self.source.model
        except GraphRagError:
            return None

    def strategies(self) -> tuple[str, ...]:
        """The strategies kept as snapshots (asks the source's model only when not configured)."""
        s = self.settings
        if s.strategies:
            return s.strategies
        return (s.strategy,) if s.strategy else s.strategies_for(self.source.model)

    def reader_config(self) -> ReaderConfig:
        """What the reader serves; the kept strategies are resolved at its first read when they
        depend on the database's layout (a reader may start while the database is down)."""
        s = self.settings
        return ReaderConfig(
            strategies=self.strategies if s.strategies is None and s.strategy is None
            else self.strategies(), seeds=s.seeds, max_token_limit=s.max_token_limit,
            layered_limits=s.layered_limits, lock_ttl_ms=s.lock_ttl_ms, lock_wait_ms=s.lock_wait_ms,
            parsed_traces=s.parsed_traces, kept_answers_bytes=s.kept_answers_mb * 2**20,
            decoded_values_bytes=s.decoded_values_mb * 2**20,
        )

    def reader(self, *, metrics: ReaderMetrics | None = None,
               on_stale: Callable[[int], None] | None = None) -> SnapshotReader:
        return SnapshotReader(
            self.service, self.cache, self.coordination, self.reader_config(), metrics=metrics,
            on_stale=on_stale, on_raced=lambda note_id: requeue(self.dirty, [note_id], now_ms=wall_ms()),
            distrust=self.feed.reason, epoch=self.access_epoch,
            verdict_ttl_ms=self.access_ttl_ms(), hot_store=self.cache.pinned(),
        )

    def token_book(self, lookups: Any = None) -> TokenBook:
        """Doughnut's access tokens (today's Doughnut), remembered ``GRAPHRAG_TOKEN_CACHE_S``;
        ``lookups`` a Prometheus counter labelled by outcome."""
        def lookup(token: str) -> TokenOwner | None:
            owner = getattr(self.source, "token_owner", None)
            if owner is None:
                raise ConfigurationError("Doughnut's user tokens need today's Doughnut "
                                         "(doughnut-2026): the 2025 tree has no viewers")
            found: TokenOwner | None = owner(token)
            return found

        return TokenBook(lookup, ttl_ms=self.access_ttl_ms(),
                         clock_ms=lambda: time.monotonic_ns() // 1_000_000, wall_ms=wall_ms,
                         on_lookup=lambda outcome: lookups.labels(outcome).inc() if lookups else None,
                         epoch=self.access_epoch)

    @cached_property
    def access_epoch(self) -> AccessWatch:
        """This process's access epoch (service.access), read from Redis by a watcher thread."""
        return AccessWatch(RedisAccessEpoch(self.client, self.keys).read)

    def access_ttl_ms(self) -> int | None:
        """How long an access answer is remembered: while the epoch holds with change capture
        (None), else ``GRAPHRAG_TOKEN_CACHE_S`` at most."""
        return None if self.settings.change_source == "cdc" else self.settings.token_cache_s * 1000

    def session_book(self, lookups: Any = None) -> SessionBook | None:
        """Doughnut's web sessions, asked of Doughnut (``GRAPHRAG_DOUGHNUT_URL``) and remembered
        ``GRAPHRAG_SESSION_CACHE_S``; None when Doughnut's address is not set."""
        s = self.settings
        if s.doughnut_url is None:
            return None
        from storage.doughnut_web import DoughnutSessions  # httpx, for the HTTP process only

        sessions = DoughnutSessions(s.doughnut_url, timeout_s=s.doughnut_timeout_ms / 1000)
        return SessionBook(sessions, ttl_ms=s.session_cache_s * 1000,
                           clock_ms=lambda: time.monotonic_ns() // 1_000_000,
                           on_lookup=lambda outcome: lookups.labels(outcome).inc() if lookups else None)

    @cached_property
    def feed(self) -> FeedWatch:
        """Whether change capture is recent enough for snapshots to be served (service.feed)."""
        heartbeat = RedisFeedHeartbeat(self.client, self.keys)
        return FeedWatch(FeedGuard(heartbeat.read, max_lag_ms=self.settings.max_feed_lag_s * 1000,
                                   expected=self.settings.change_source == "cdc"))

    def unfollowed(self) -> str | None:
        """Why nothing keeps the snapshots current, for ``/healthz`` (None: something does, or the
        feed check is off and it cannot be told): ``GRAPHRAG_CHANGE_SOURCE=none``, or ``auto`` with
        no webhook secret and no heartbeat of change capture."""
        s = self.settings
        if s.change_source == "none":
            return ("no change source (GRAPHRAG_CHANGE_SOURCE=none): snapshots follow edits only "
                    "at the nightly rebuild and the soft TTL")
        if s.change_source != "auto" or s.webhook_secret is not None or not self.feed.guard.enabled:
            return None
        self.feed.reason()  # starts the watch: it has read the heartbeat once
        if self.feed.guard.heard:
            return None
        return ("no change source: no change capture heartbeat and no GRAPHRAG_WEBHOOK_SECRET "
                "(run `graphrag cdc`, or set GRAPHRAG_CHANGE_SOURCE)")

    def rebuild(self, note_ids: Iterable[int], *, progress: Callable[[int], None] | None = None,
                carry: Carry | None = None) -> RebuildReport:
        """Rebuild every configured snapshot (strategies x seeds [x layered limits]); ``carry``
        (a worker process's, from :meth:`carry`) hands loaded data on to the next call."""
        s = self.settings
        return rebuild(self.service, self.cache, note_ids, strategies=self.strategies(),
                       seeds=s.seeds, max_token_limit=s.max_token_limit,
                       layered_limits=s.layered_limits, now_ms=wall_ms(),
                       epoch_size=s.rebuild_page, progress=progress, carry=carry or self.carry())

    def rehearse(self) -> None:
        """Everything a rebuild of the first live note does but write (service.rebuild.rehearse)."""
        s = self.settings
        rehearse(self.service, self.cache, self.source.live_ids_after(0, 1),
                 strategies=self.strategies(), seeds=s.seeds, max_token_limit=s.max_token_limit,
                 layered_limits=s.layered_limits, now_ms=wall_ms())

    def rebuild_piece(self, note_ids: list[int], *,
                      progress: Callable[[int], None] | None = None) -> RebuildReport:
        """Rebuild one full-rebuild piece, its own notes loaded first, into the workspace this
        process carried on from its last piece (:attr:`pieces`)."""
        return self.rebuild_pieces([note_ids], progress=progress, carry=self.pieces)

    def rebuild_pieces(self, pieces: Iterable[Sequence[int]], *,
                       progress: Callable[[int], None] | None = None,
                       carry: Carry | None = None) -> RebuildReport:
        """Rebuild every configured snapshot of every piece (service.full_rebuild), one workspace
        carried on from piece to piece (by ``carry``, else by one for this call, let go with it)."""
        s = self.settings
        return rebuild_pieces(self.service, self.cache, pieces, strategies=self.strategies(),
                              seeds=s.seeds, max_token_limit=s.max_token_limit,
                              layered_limits=s.layered_limits, now_ms=wall_ms(), progress=progress,
                              carry=carry or self.piece_carry())

    def carry(self) -> Carry:
        """A carry of loaded data from epoch to epoch, bounded as configured (service.carry)."""
        s = self.settings
        return Carry(max_foci=s.carry_foci, max_age_ms=s.carry_age_ms, clock_ms=wall_ms)

    @cached_property
    def drains(self) -> Carry:
        """This process's carry of loaded data from one drain's rebuild to the next
        (worker.celery.runtime lets it go once it is too old to use)."""
        return self.carry()

    @cached_property
    def pieces(self) -> Carry:
        """This process's carry of a full rebuild's workspace from one ``rebuild_piece`` to the
        next (worker.celery.runtime lets it go after a drain and when the process sits idle)."""
        return self.piece_carry()

    def piece_carry(self) -> Carry:
        """A carry of a full rebuild's workspace from piece to piece, bounded by the foci it
        serves alone (service.full_rebuild): a run is read afresh from its start's ``seq``."""
        return Carry(max_foci=self.settings.piece_carry_foci)
