"""What keeps the snapshots current (``GRAPHRAG_CHANGE_SOURCE``), as ``/healthz`` and a read say it.

The HTTP reader as ``graphrag serve`` wires it (the bundled sample in SQLite, the real Redis):

* ``auto`` with no webhook secret and no change capture heartbeat: ``/healthz`` is ``degraded`` and
  says no change source follows the edits (snapshots are still served: nothing says they are old);
* ``auto`` with a webhook secret, or ``webhook``: ``ok``; ``webhook`` without a secret refuses to
  start with one line;
* ``none``: said so, explicitly;
* ``cdc`` before change capture's first heartbeat: every read is computed live and says why
  (``X-Graphrag-Reason``), and ``/healthz`` names the command to start; once a heartbeat exists,
  snapshots are served and ``/healthz`` is ``ok``.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from graphrag.core.errors import ConfigurationError
from storage.redis.keys import Keys
from storage.redis.positions import RedisFeedHeartbeat
from tests.redis.readers import real_redis, redis_url, unique_prefix
from worker.http.server import build_http_app
from worker.settings import load_settings

pytestmark = [pytest.mark.redis, pytest.mark.usefixtures("no_inherited_settings")]

TOKEN = "change-source-token"
SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123").decode()


@contextmanager
def reader(sample_url: str, **settings: Any) -> Iterator[tuple[TestClient, Any, Keys]]:
    prefix = unique_prefix()
    with real_redis(prefix) as client:
        loaded = load_settings(database_url=sample_url, redis_url=redis_url(), redis_prefix=prefix,
                               token_counter="chars", reader_token=TOKEN, **settings)
        with TestClient(build_http_app(loaded, redis_client=client)) as http:
            yield http, client, Keys(prefix)


def health(http: TestClient) -> dict[str, str]:
    response = http.get("/healthz")
    assert response.status_code == 200
    report: dict[str, str] = response.json()
    return report


def test_no_source_is_said(sample_url: str) -> None:
    with reader(sample_url) as (http, _, _):
        report = health(http)
        assert report["status"] == "degraded" and report["feed"].startswith("no change source")
    with reader(sample_url, change_source="none") as (http, _, _):
        report = health(http)
        assert report["status"] == "degraded"
        assert "GRAPHRAG_CHANGE_SOURCE=none" in report["feed"]


def test_a_webhook_secret_is_a_source(sample_url: str) -> None:
    for chosen in ("auto", "webhook"):
        with reader(sample_url, change_source=chosen, webhook_secret=SECRET) as (http, _, _):
            assert health(http) == {"status": "ok", "redis": "ok", "database": "ok", "feed": "ok"}
    with pytest.raises(ConfigurationError, match="GRAPHRAG_CHANGE_SOURCE=webhook needs"):
        build_http_app(load_settings(database_url=sample_url, reader_token=TOKEN,
                                     change_source="webhook"))


def test_change_capture_that_never_ran_is_not_trusted_until_its_first_heartbeat(
        sample_url: str) -> None:
    with reader(sample_url, change_source="cdc") as (http, client, keys):
        report = health(http)
        assert report["status"] == "degraded" and "`graphrag cdc`" in report["feed"]
        read = http.get("/notes/1/graph", headers={"Authorization": f"Bearer {TOKEN}"})
        assert read.status_code == 200 and read.headers["X-Graphrag-Source"] == "live"
        assert "change capture has not run yet" in read.headers["X-Graphrag-Reason"]
        RedisFeedHeartbeat(client, keys).beat(behind_ms=0)
        deadline = time.monotonic() + 60
        while health(http)["feed"] != "ok":  # the verdict is refreshed every second
            assert time.monotonic() < deadline, "the heartbeat was never seen"
            time.sleep(0.05)
        assert health(http)["status"] == "ok"
