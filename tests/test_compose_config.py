"""docker-compose.yml as Compose itself resolves it: legacy ``docker-compose`` 1.29 (Debian's
package; its interpolation is what broke a nested default before), with dummy secrets.

Every URL a project process is given resolves to a URL (no ``$`` left, the scheme and host Compose
was meant to produce), both with the laptop's defaults and with a production database's URL set.
Compose v2 interpolates the same syntax (tests/test_deployment_compose.py reads the file the way it
does); v1 ignores ``configs:`` (the monitoring's files, the stand-in's grant), which is why the runbook
asks for v2.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

from tests.deployment_support import COMPOSE_FILE

COMPOSE_V1 = "/usr/bin/docker-compose"
DUMMIES = {"GRAPHRAG_READER_TOKEN": "dummy-token", "FLOWER_BASIC_AUTH": "admin:dummy",
           "GRAFANA_ADMIN_PASSWORD": "dummy", "MYSQL_ROOT_PASSWORD": "dummy-root"}
PROJECT = ("http", "worker", "beat", "cdc")


def resolved(**environ: str) -> dict[str, Any]:
    if not os.access(COMPOSE_V1, os.X_OK):
        pytest.fail(f"{COMPOSE_V1} is missing: install Debian's docker-compose (make test does)",
                    pytrace=False)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")} | DUMMIES
    done = subprocess.run([COMPOSE_V1, "-f", str(COMPOSE_FILE), "config"], env=env | environ,
                          capture_output=True, timeout=60, cwd=COMPOSE_FILE.parent)
    assert done.returncode == 0, done.stderr.decode()
    config: dict[str, Any] = yaml.safe_load(done.stdout)
    return config


def urls(config: dict[str, Any], service: str) -> dict[str, str]:
    env = config["services"][service].get("environment") or {}
    return {k: str(v) for k, v in env.items() if k.endswith("_URL") and v not in (None, "")}


def test_every_url_resolves_with_the_laptops_defaults() -> None:
    config = resolved()
    for service in PROJECT:
        found = urls(config, service)
        assert "GRAPHRAG_DATABASE_URL" in found and "CELERY_BROKER_URL" in found, service
        for name, url in found.items():
            assert "$" not in url and "{" not in url, (service, name, url)
        database = make_url(found["GRAPHRAG_DATABASE_URL"])
        assert (database.host, database.database) == ("mysql", "doughnut"), service
    assert config["services"]["cdc"]["environment"]["GRAPHRAG_CDC_DATABASE_URL"] in ("", None)


def test_a_production_database_moves_every_process_change_capture_included() -> None:
    production = "mysql+pymysql://graphrag:p%40ss@doughnut-db.internal:3306/doughnut"
    capture = "mysql+pymysql://graphrag_cdc:c%40ss@doughnut-db.internal:3306/doughnut"
    config = resolved(GRAPHRAG_DATABASE_URL=production, GRAPHRAG_CDC_DATABASE_URL=capture,
                      CELERY_BROKER_URL="amqp://graphrag:x@rabbitmq:5672/doughnut")
    for service in PROJECT:
        found = urls(config, service)
        assert found["GRAPHRAG_DATABASE_URL"] == production, service
        assert found["GRAPHRAG_CDC_DATABASE_URL"] == capture, service
        assert found["CELERY_BROKER_URL"].startswith("amqp://"), service


def test_defaults_are_todays_doughnuts() -> None:
    env = resolved()["services"]["http"]["environment"]
    assert env["GRAPHRAG_CHANGE_SOURCE"] == "cdc" and env["GRAPHRAG_READER_AUTH"] == "both"
    assert env.get("GRAPHRAG_WEBHOOK_SECRET") in ("", None)  # only where webhooks are used
