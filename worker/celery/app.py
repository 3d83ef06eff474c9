"""``celery -A worker.celery.app worker|beat``: the worker's Celery app built from the environment's
settings (:func:`worker.celery.runtime.worker_app`: the app every process sees, with the tasks'
runtime registered)."""

from __future__ import annotations

import sys

from celery import Celery

from graphrag.core.errors import ConfigurationError
from worker.celery.runtime import worker_app
from worker.settings import load_settings

__all__ = ["app"]


def _load() -> Celery:
    try:
        return worker_app(load_settings())
    except ConfigurationError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from err


app = _load()
