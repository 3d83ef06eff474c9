"""Wiring of the HTTP process: settings -> reader, refresher, metrics -> ASGI app."""

from __future__ import annotations

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from graphrag import GraphRagError
from graphrag.errors import ConfigurationError
from storage.metrics import ReaderMetrics
from worker.compose import (
    build_reader,
    build_redis,
    build_service,
    build_snapshot_store,
    rebuild_notes,
)
from worker.http import create_app
from worker.refresh import BackgroundRefresher
from worker.settings import Settings

__all__ = ["build_http_app"]


def build_http_app(settings: Settings) -> FastAPI:
    """The app ``graphrag serve`` runs; refuses to start without a reader token."""
    if settings.reader_token is None or not settings.reader_token.get_secret_value():
        raise ConfigurationError("GRAPHRAG_READER_TOKEN must be set to serve snapshots over HTTP")
    service = build_service(settings)
    store = build_snapshot_store(settings, build_redis(settings))
    registry = CollectorRegistry()
    refresher = BackgroundRefresher(
        lambda note_id: rebuild_notes(settings, service, store, [note_id]), store
    )
    reader = build_reader(settings, service, store, metrics=ReaderMetrics.create(registry),
                          on_stale=refresher)

    def health() -> dict[str, str]:
        report = {}
        for name, check in (("redis", store.ping), ("database", service.store.ping)):
            try:
                check()
                report[name] = "ok"
            except GraphRagError as err:
                report[name] = str(err)
        return report

    return create_app(reader, reader_token=settings.reader_token.get_secret_value(),
                      registry=registry, health=health)
