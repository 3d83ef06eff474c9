"""A MariaDB user with nothing but ``SELECT ON <db>.note`` (the least-privilege and secrets suites).

:func:`restricted` (a module fixture) creates a database with the bundled sample notebook and a user
of a unique name that may only read its ``note`` table, and drops the user afterwards; the
least-privilege suite runs every read path as that user, the secrets suite points the CLI at its real
database with a wrong password. :func:`redis_url` is the real Redis the CLI runs use.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.database import open_engine
from tests.conftest import mariadb_database, url_string
from tests.reliability.support import sample_rows
from tests.wiring import NoteStore

REDIS_URL_ENV = "GRAPHRAG_TEST_REDIS_URL"


def redis_url() -> str:
    return os.environ.get(REDIS_URL_ENV, "").strip() or "redis://127.0.0.1:6379/0"


# -- a SELECT-only user ---------------------------------------------------------------------------
@dataclass
class Restricted:
    admin: Engine
    engine: Engine
    url: URL
    user: str
    live_ids: list[int]

    def store(self) -> NoteStore:
        return NoteStore(self.engine)


@pytest.fixture(scope="module")
def restricted() -> Iterator[Restricted]:
    with mariadb_database() as url:
        admin = open_engine(url_string(url))
        notes = NoteStore(admin)
        notes.create_table()
        rows = sample_rows()
        notes.insert(rows)
        user, password = f"graphrag_ro_{uuid.uuid4().hex[:10]}", f"Ro-{uuid.uuid4().hex}"
        try:
            with admin.begin() as conn:
                conn.execute(text(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'"))
                conn.execute(text(f"GRANT SELECT ON `{url.database}`.`note` TO '{user}'@'%'"))
        except SQLAlchemyError as err:
            admin.dispose()
            pytest.fail(f"the MariaDB test user may not CREATE USER / GRANT: {err}", pytrace=False)
        ro_url = url.set(username=user, password=password)
        engine = open_engine(url_string(ro_url))
        live = sorted(r["id"] for r in rows if r["deleted_at"] is None)
        try:
            yield Restricted(admin, engine, ro_url, user, live)
        finally:
            engine.dispose()
            with admin.begin() as conn:
                conn.execute(text(f"DROP USER IF EXISTS '{user}'@'%'"))
            admin.dispose()
