"""Wiring of the HTTP process: settings -> reader, refresher, metrics, Doughnut's users -> the
internal app and, with ``GRAPHRAG_PUBLIC_PORT``, the public one (worker.http.listen)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import Celery
from prometheus_client import CollectorRegistry, Gauge, Histogram
from starlette.types import ASGIApp

from graphrag import GraphRagError
from graphrag.core.errors import ConfigurationError
from service.events import outdate_shown, sibling_radius
from service.metrics import (
    ReaderMetrics,
    edit_stages,
    http_responses,
    session_lookups,
    token_lookups,
)
from service.ports import NoteSource, SnapshotCache
from service.sessions import Viewers
from worker.broker import is_amqp
from worker.celery_app import create_celery
from worker.compose import Wiring
from worker.enqueue import celery_drainer, celery_enqueuer, outdating, recorder, recording
from worker.http.app import create_app
from worker.http.doughnut_paths import DoughnutAuth
from worker.http.listen import ByListener
from worker.http.metrics import count_responses
from worker.http.public import create_public_app
from worker.http.webhook import WebhookReceiver
from worker.refresh import BackgroundRefresher
from worker.settings import Settings

__all__ = ["HttpApps", "build_http_app", "build_http_apps", "health_of"]


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


def build_http_app(settings: Settings, *, redis_client: Any = None,
                   celery: Celery | None = None) -> ASGIApp:
    """What ``graphrag serve`` runs: the internal app, and with ``GRAPHRAG_PUBLIC_PORT`` the public
    one beside it (worker.http.listen); refuses to start without a reader token where one is needed.

    ``redis_client`` and ``celery`` replace the ones the settings describe (the demo and tests).
    """
    apps = build_http_apps(settings, redis_client=redis_client, celery=celery)
    if apps.public is None or settings.public_port is None:
        return apps.internal
    return ByListener(apps.internal, apps.public, settings.public_port)


@dataclass(frozen=True)
class HttpApps:
    """The internal app (everything) and the public one (Doughnut's paths for Doughnut's users),
    over one reader."""

    internal: ASGIApp
    public: ASGIApp | None


def build_http_apps(settings: Settings, *, redis_client: Any = None,
                    celery: Celery | None = None) -> HttpApps:
    """Both apps of the HTTP process, wired from ``settings`` (see :func:`build_http_app`)."""
    token = _checked_token(settings)
    wiring = Wiring(settings, redis_client=redis_client)
    wiring.check_binding()
    registry = CollectorRegistry()
    refresher = BackgroundRefresher(lambda note_id: wiring.rebuild([note_id]), wiring.coordination,
                                    wiring.dirty)
    reader = wiring.reader(metrics=ReaderMetrics.create(registry), on_stale=refresher)
    Gauge("graphrag_feed_behind", "1 while the change feed is behind the bound and every read is "
          "answered from the database (service.feed)", registry=registry).set_function(
        lambda: float(wiring.feed.reason() is not None))
    auth, responses = _doughnut_auth(settings, wiring, registry, token), http_responses(registry)
    app = create_app(reader, reader_token=token or None, registry=registry,
                     webhook=_webhook(settings, wiring, celery, edit_stages(registry)),
                     health=health_of(wiring.cache, wiring.source,
                                      lambda: wiring.feed.reason() or wiring.unfollowed()),
                     doughnut=auth)
    public = None
    if settings.public_port is not None:
        users = auth if auth.viewers else _doughnut_auth(settings, wiring, registry, token,
                                                          mode="doughnut")
        public = count_responses(create_public_app(reader, users), responses)
    return HttpApps(count_responses(app, responses), public)


def _checked_token(settings: Settings) -> str:
    token = settings.reader_token.get_secret_value() if settings.reader_token else ""
    if not token and settings.reader_auth != "doughnut":
        raise ConfigurationError("GRAPHRAG_READER_TOKEN must be set to serve snapshots over HTTP "
                                 f"(GRAPHRAG_READER_AUTH={settings.reader_auth})")
    if settings.reader_auth != "shared" and settings.schema_name == "doughnut-2025":
        raise ConfigurationError(f"GRAPHRAG_READER_AUTH={settings.reader_auth} needs today's "
                                 "Doughnut (doughnut-2026): the 2025 tree has no viewers")
    if settings.change_source == "webhook" and settings.webhook_secret is None:
        raise ConfigurationError("GRAPHRAG_CHANGE_SOURCE=webhook needs GRAPHRAG_WEBHOOK_SECRET")
    if settings.public_port is not None and settings.schema_name == "doughnut-2025":
        raise ConfigurationError("GRAPHRAG_PUBLIC_PORT serves Doughnut's users: it needs today's "
                                 "Doughnut (doughnut-2026)")
    return token


def _webhook(settings: Settings, wiring: Wiring, celery: Celery | None,
             stages: Histogram) -> WebhookReceiver | None:
    """The webhook's receiver, timing the stages of an edit it takes part in (none without a
    secret: the series stay at 0)."""
    if settings.webhook_secret is None:
        return None
    celery = celery or create_celery(settings)
    to_task = outdating(celery_enqueuer(celery, stages),
                        lambda ids: outdate_shown(ids, wiring.cache), stages)
    drain_in = celery_drainer(celery, wiring.coordination, stages=stages,
                              subsecond_countdowns=not is_amqp(settings.broker_url))
    record = recorder(wiring.source, wiring.cache, wiring.dirty, drain_in=drain_in, stages=stages,
                      sibling_radius=sibling_radius(wiring.strategies()),
                      debounce_ms=settings.debounce_ms)
    return WebhookReceiver(settings.webhook_secret.get_secret_value(), wiring.coordination,
                           recording(record, to_task),
                           max_events=settings.webhook_max_events, model=wiring.known_model)


def _doughnut_auth(settings: Settings, wiring: Wiring, registry: CollectorRegistry, token: str,
                   mode: str | None = None) -> DoughnutAuth:
    """How Doughnut's paths authenticate: the shared token, and Doughnut's users (tokens and web
    sessions) unless only the shared token is asked for."""
    mode = mode or settings.reader_auth
    if mode == "shared":
        return DoughnutAuth("shared", shared_token=token or None)
    viewers = Viewers(wiring.token_book(token_lookups(registry)),
                      wiring.session_book(session_lookups(registry)))
    return DoughnutAuth(mode, viewers=viewers, shared_token=token or None)
