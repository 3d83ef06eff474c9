"""Wiring of the HTTP process: settings -> reader, refresher, metrics -> ASGI app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Gauge

from graphrag import GraphRagError
from graphrag.core.errors import ConfigurationError
from service.events import outdate_shown
from service.metrics import ReaderMetrics, token_lookups
from service.ports import NoteSource, SnapshotCache
from worker.celery_app import create_celery
from worker.compose import Wiring
from worker.enqueue import celery_enqueuer, outdating
from worker.http.app import create_app
from worker.http.doughnut_paths import DoughnutAuth
from worker.http.metrics import count_responses
from worker.http.webhook import WebhookReceiver
from worker.refresh import BackgroundRefresher
from worker.settings import Settings

__all__ = ["build_http_app", "health_of"]


def health_of(store: SnapshotCache, source: NoteSource,
              feed: Callable[[], str | None] = lambda: None) -> Callable[[], dict[str, str]]:
    """``/healthz``'s report: Redis and the database, each ``"ok"`` or the reason it is not, and
    the change feed (``"ok"``, or why snapshots are not trusted now: service.feed)."""

    def database() -> None:
        source.ping()  # looked up at each check: a detected layout needs the database to exist

    def health() -> dict[str, str]:
        report = {}
        for name, check in (("redis", store.ping), ("database", database)):
            try:
                check()
                report[name] = "ok"
            except GraphRagError as err:
                report[name] = str(err)
        report["feed"] = feed() or "ok"
        return report

    return health


def build_http_app(
    settings: Settings, *, redis_client: Any = None, celery: Celery | None = None
) -> FastAPI:
    """The app ``graphrag serve`` runs; refuses to start without a reader token.

    ``redis_client`` and ``celery`` replace the ones the settings describe (the demo and tests).
    """
    token = settings.reader_token.get_secret_value() if settings.reader_token else ""
    if not token and settings.reader_auth != "doughnut":
        raise ConfigurationError("GRAPHRAG_READER_TOKEN must be set to serve snapshots over HTTP "
                                 f"(GRAPHRAG_READER_AUTH={settings.reader_auth})")
    if settings.reader_auth != "shared" and settings.schema_name == "doughnut-2025":
        raise ConfigurationError(f"GRAPHRAG_READER_AUTH={settings.reader_auth} needs today's "
                                 "Doughnut (doughnut-2026): the 2025 tree has no viewers")
    wiring = Wiring(settings, redis_client=redis_client)
    wiring.check_binding()
    registry = CollectorRegistry()
    refresher = BackgroundRefresher(lambda note_id: wiring.rebuild([note_id]), wiring.coordination,
                                    wiring.dirty)
    reader = wiring.reader(metrics=ReaderMetrics.create(registry), on_stale=refresher)
    Gauge("graphrag_feed_behind", "1 while the change feed is behind the bound and every read is "
          "answered from the database (service.feed)", registry=registry).set_function(
        lambda: float(wiring.feed.reason() is not None))

    webhook = None
    if settings.webhook_secret is not None:
        webhook = WebhookReceiver(settings.webhook_secret.get_secret_value(), wiring.coordination,
                                  outdating(celery_enqueuer(celery or create_celery(settings)),
                                            lambda ids: outdate_shown(ids, wiring.cache)),
                                  max_events=settings.webhook_max_events)
    auth = DoughnutAuth(settings.reader_auth, shared_token=token or None,
                        book=None if settings.reader_auth == "shared" else wiring.token_book(
                            token_lookups(registry)))
    app = create_app(reader, reader_token=token or None, registry=registry, webhook=webhook,
                     health=health_of(wiring.cache, wiring.source, wiring.feed.reason),
                     doughnut=auth)
    return count_responses(app, registry)
