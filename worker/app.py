"""``celery -A worker.app worker|beat``: the Celery app built from the environment's settings."""

from __future__ import annotations

import sys

from celery import Celery

from graphrag.core.errors import ConfigurationError
from worker.celery_app import create_celery
from worker.settings import load_settings

__all__ = ["app"]


def _load() -> Celery:
    try:
        return create_celery(load_settings())
    except ConfigurationError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(2) from err


app = _load()
