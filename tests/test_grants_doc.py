"""The grants per mode: one list (storage/grants.py), shown as generated in README and the runbook,
and enough on a real MariaDB: each user made with exactly the documented SQL runs its process.

The reading user reads its layout (a live context through the CLI, the schema check, the cache's
binding); the token table is what ``GRAPHRAG_READER_AUTH=doughnut|both`` adds. Change capture's user
passes change capture's own privilege check for the tables it watches (the shared server has no
binary log, so only the log-setting lines of that check may remain).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import orjson
import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL

import service.cdc
from graphrag.core.errors import GraphRagError
from ops.docgen import differences
from service.cdc import WATCHED
from service.ports import NoteSource
from storage.binlog import CdcSetupError, check_server
from storage.database import open_engine
from storage.grants import (
    LAYOUTS,
    REPLICATION,
    capture_sql,
    capture_tables,
    reader_sql,
    reader_tables,
)
from storage.profiles import PROFILES, open_source, tables_2026
from storage.profiles.sample_2026 import SAMPLE_2026_FOCUS_IDS
from storage.sample import SAMPLE_FOCUS_IDS
from tests.conftest import mariadb_database, url_string
from tests.deployment_support import ROOT
from worker.cli.commands import load_sample

MODELS = {p.name: p.model for p in PROFILES}
FOCUS = {"doughnut-2026": SAMPLE_2026_FOCUS_IDS["hub"], "doughnut-2025": SAMPLE_FOCUS_IDS["hub"]}


def test_readme_and_runbook_show_the_generated_grants() -> None:
    found = [d for doc in ("README.md", "ops/runbook.md") for d in differences(doc) if "[grants-" in d]
    assert not found, "the grants shown differ from storage/grants.py (run `make docs`):\n" + \
        "\n".join(found)


def test_the_layouts_are_the_profiles_and_read_their_tables() -> None:
    assert set(LAYOUTS) == set(MODELS)
    assert reader_tables("doughnut-2026") == tuple(tables_2026.REQUIRED)
    assert reader_tables("doughnut-2026", doughnut_users=True)[-1] == "user_token"
    assert reader_tables("doughnut-2025", doughnut_users=True) == ("note",)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_capture_selects_what_it_watches_and_the_layouts_tables(layout: str) -> None:
    assert set(capture_tables(layout)) == set(WATCHED[MODELS[layout]]) | set(reader_tables(layout))


def test_capture_follows_the_watched_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(service.cdc.WATCHED, "wiki", WATCHED["wiki"] | {"user_token"})  # type: ignore[index]
    assert "GRANT SELECT ON doughnut.user_token TO 'graphrag_cdc'@'%';" in capture_sql("doughnut-2026")


def test_the_stand_in_lets_its_user_follow_the_log_with_the_listed_privileges() -> None:
    sql = (ROOT / "ops" / "mysql" / "replication.sql").read_text(encoding="utf-8")
    grants = [line for line in sql.splitlines() if line.startswith("GRANT")]
    assert grants == [f"GRANT {', '.join(REPLICATION)} ON *.* TO 'graphrag'@'%';"]


# -- on MariaDB ------------------------------------------------------------------------------------
Statements = Callable[..., list[str]]  # (layout, database=, account=, password=) -> SQL lines


@contextmanager
def documented_user(layout: str, statements: Statements, *, users: bool = True) -> Iterator[URL]:
    """A sample database of ``layout`` and a user made by running exactly the documented SQL (without
    the lines after its ``--`` comment unless ``users``); the user's URL."""
    user, password = f"graphrag_g_{uuid.uuid4().hex[:10]}", f"Pw-{uuid.uuid4().hex}"
    with mariadb_database() as url:
        load_sample(url_string(url), layout)
        sql = statements(layout, database=url.database, account=f"'{user}'@'%'", password=password)
        cut = next((i for i, s in enumerate(sql) if s.startswith("--")), len(sql))
        admin = open_engine(url_string(url))
        try:
            with admin.begin() as conn:
                for statement in sql if users else sql[:cut]:
                    if not statement.startswith("--"):
                        conn.execute(text(statement.rstrip(";")))
            yield url.set(username=user, password=password)
        finally:
            with admin.begin() as conn:
                conn.execute(text(f"DROP USER IF EXISTS '{user}'@'%'"))
            admin.dispose()


@contextmanager
def source_as(url: URL, schema: str = "auto") -> Iterator[NoteSource]:
    engine = open_engine(url_string(url))
    try:
        yield open_source(engine, schema)
    finally:
        engine.dispose()


def live_context(url: URL, note: int) -> dict[str, object]:
    code = "from worker.cli.main import main; main()"
    run = subprocess.run([sys.executable, "-c", code, "context", str(note), "--live", "--db",
                          url_string(url)], capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode()
    return dict(orjson.loads(run.stdout))


def _layout_of(source: NoteSource) -> str:
    return source.identity().description.split(" database ")[0]


@pytest.mark.mariadb
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_reading_user_runs_its_layout(layout: str) -> None:
    with documented_user(layout, reader_sql) as url:
        with source_as(url) as source:
            source.check()
            assert _layout_of(source) == layout
        assert "focusNote" in live_context(url, FOCUS[layout])


@pytest.mark.mariadb
@pytest.mark.parametrize("users", [True, False], ids=["doughnut-users", "shared"])
def test_doughnuts_users_need_the_token_table_and_only_they(users: bool) -> None:
    with documented_user("doughnut-2026", reader_sql, users=users) as url, \
            source_as(url, "doughnut-2026") as source:
        source.check()
        if users:
            assert source.token_owner("no-such-token") is None
        else:
            with pytest.raises(GraphRagError, match="user_token"):
                source.token_owner("no-such-token")


@pytest.mark.mariadb
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_capture_user_passes_change_captures_privilege_check(layout: str) -> None:
    with documented_user(layout, capture_sql) as url:
        try:
            check_server(url_string(url), watched_tables=WATCHED[MODELS[layout]])
        except CdcSetupError as err:  # the shared server keeps no binary log: those lines only
            privileges = [p for p in err.problems if "lacks" in p or "does not exist" in p]
            assert not privileges, privileges
        with source_as(url) as source:  # it detects the layout and reads the cache's binding
            assert _layout_of(source) == layout
