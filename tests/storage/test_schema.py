"""Schema checks and errors: every failure leaves the storage layer as a GraphRagError, on one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from graphrag import (
    CharsCounter,
    ConfigurationError,
    DatabaseUnavailable,
    GraphRagError,
    Request,
    SchemaMismatch,
    StrategyParams,
)
from service.context import ContextService
from storage.database import open_engine
from storage.profiles import detect, open_source
from storage.profiles.admin_2025 import create_tables, insert_notes
from storage.profiles.doughnut_2025 import Doughnut2025 as NoteStore
from storage.profiles.tables_2025 import FIXED_COLUMNS
from tests.storage.graphs import hand_graph
from tests.support import NOW_MS

REQUIRED_COLUMNS = (*FIXED_COLUMNS, "topic_constructor", "description")

UNREACHABLE_URLS = (
    "mysql+pymysql://root@127.0.0.1:1/",  # nothing listens on port 1
    "mysql+pymysql://root@127.0.0.1:1/doughnut?connect_timeout=2",
    "sqlite:////nonexistent-graphrag-dir/sub/t.db",  # the directory does not exist
)

# Doughnut's note table without `sibling_order` and `deleted_at`, plus columns the service ignores.
PARTIAL_DDL = """
CREATE TABLE note (
    id INTEGER NOT NULL PRIMARY KEY,
    parent_id INTEGER NULL,
    target_note_id INTEGER NULL,
    topic_constructor VARCHAR(150) NOT NULL,
    description TEXT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    picture_url VARCHAR(1024) NULL,
    level INTEGER NULL
)
"""

FULL_DDL = """
CREATE TABLE note (
    id INTEGER NOT NULL PRIMARY KEY,
    parent_id INTEGER NULL,
    target_note_id INTEGER NULL,
    sibling_order BIGINT NOT NULL DEFAULT 1,
    topic_constructor VARCHAR(150) NOT NULL,
    description TEXT NULL,
    created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP NULL,
    deleted_at TIMESTAMP(3) NULL,
    notebook_id INTEGER NULL,
    creator_id INTEGER NULL,
    picture_url VARCHAR(1024) NULL,
    wikidata_id VARCHAR(50) NULL,
    remember_spelling INTEGER NULL,
    level INTEGER NULL
)
"""


def service(store: NoteStore) -> ContextService:
    return ContextService(store, CharsCounter(), StrategyParams())


def one_line(err: BaseException) -> str:
    message = str(err)
    assert message and "\n" not in message, repr(message)
    return message


# -- check_schema -----------------------------------------------------------------------------------
def test_created_table_passes(store: NoteStore) -> None:
    store.check()


def test_doughnut_shaped_table_with_extra_columns_passes(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text(FULL_DDL))
    NoteStore(engine).check()


def test_missing_columns_are_named(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text(PARTIAL_DDL))
    with pytest.raises(SchemaMismatch) as info:
        NoteStore(engine).check()
    message = one_line(info.value)
    assert "deleted_at" in message and "sibling_order" in message
    for present in set(REQUIRED_COLUMNS) - {"deleted_at", "sibling_order"}:
        assert present not in message


def test_computing_on_a_mismatched_table_is_a_service_error(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text(PARTIAL_DDL))
        conn.execute(text("INSERT INTO note (id, topic_constructor) VALUES (1, 'x')"))
    with pytest.raises(GraphRagError) as info:
        service(NoteStore(engine)).compute(Request(1, 0, 5000, NOW_MS), "wavefront")
    assert not isinstance(info.value, SQLAlchemyError)
    one_line(info.value)


def test_missing_table_is_a_clear_schema_error(engine: Engine) -> None:
    with pytest.raises(SchemaMismatch) as info:
        NoteStore(engine).check()
    message = one_line(info.value)
    assert "note" in message and "does not exist" in message


def test_computing_without_a_table_is_a_service_error(engine: Engine) -> None:
    with pytest.raises(DatabaseUnavailable) as info:
        service(NoteStore(engine)).compute(Request(1, 0, 5000, NOW_MS), "layered")
    one_line(info.value)


# -- unreachable databases --------------------------------------------------------------------------
@pytest.mark.parametrize("url", UNREACHABLE_URLS)
def test_unreachable_database_in_check_schema(url: str) -> None:
    engine = open_engine(url)
    try:
        with pytest.raises(DatabaseUnavailable) as info:
            NoteStore(engine).check()
    finally:
        engine.dispose()
    one_line(info.value)
    assert isinstance(info.value.__cause__, SQLAlchemyError)


@pytest.mark.parametrize("url", UNREACHABLE_URLS)
@pytest.mark.parametrize("strategy", ["wavefront", "layered"])
def test_unreachable_database_in_compute(url: str, strategy: str) -> None:
    engine = open_engine(url)
    try:
        svc = service(NoteStore(engine))
        with pytest.raises(DatabaseUnavailable) as info:
            svc.compute(Request(1, 0, 5000, NOW_MS), strategy)
        one_line(info.value)
        with pytest.raises(DatabaseUnavailable):
            svc.compute_many([Request(i, 0, 5000, NOW_MS) for i in (1, 2, 3)], strategy)
    finally:
        engine.dispose()


def test_unreachable_database_in_paging() -> None:
    engine = open_engine(UNREACHABLE_URLS[0])
    try:
        with pytest.raises(DatabaseUnavailable):
            NoteStore(engine).live_ids_after(0, 10)
    finally:
        engine.dispose()


def test_unreachable_message_hides_the_password() -> None:
    engine = open_engine("mysql+pymysql://root:s3cret-pw@127.0.0.1:1/doughnut")
    try:
        with pytest.raises(DatabaseUnavailable) as a:
            NoteStore(engine).check()
        with pytest.raises(DatabaseUnavailable) as b:
            service(NoteStore(engine)).compute(Request(1, 0, 5000, NOW_MS), "wavefront")
    finally:
        engine.dispose()
    for info in (a, b):
        assert "s3cret-pw" not in str(info.value)


# -- malformed URLs ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "",
        "not a url",
        "localhost:3306/doughnut",
        "nosuchdialect://root@127.0.0.1/doughnut",
        "mysql+nosuchdriver://root@127.0.0.1/doughnut",
        "mysql+pymysql://root@127.0.0.1:notaport/doughnut",
    ],
)
def test_malformed_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_engine(url)
    one_line(info.value)


# -- renamed columns and profile detection ----------------------------------------------------------
@pytest.mark.parametrize(("title", "details"), [
    ("topic_constructor", "description"), ("title_constructor", "details"), ("title", "content"),
])
def test_every_2025_column_naming_gives_the_same_bytes(engine: Engine, title: str, details: str,
                                                       tmp_path: Path) -> None:
    create_tables(engine, title=title, details=details)
    insert_notes(engine, hand_graph().records())
    source = open_source(engine, "auto")
    assert (source.profile, source.model) == ("doughnut-2025", "tree")
    source.check()
    got = [service(source).compute(Request(f, 0, 5000, NOW_MS), s).to_json()
           for f in (2, 10, 13) for s in ("wavefront", "layered", "relationship-bfs")]
    reference = open_engine(f"sqlite:///{tmp_path / 'ref.db'}")
    try:
        create_tables(reference)
        insert_notes(reference, hand_graph().records())
        want = [service(NoteStore(reference)).compute(Request(f, 0, 5000, NOW_MS), s).to_json()
                for f in (2, 10, 13) for s in ("wavefront", "layered", "relationship-bfs")]
    finally:
        reference.dispose()
    assert got == want


def test_detection_names_what_a_database_lacks(engine: Engine) -> None:
    with pytest.raises(SchemaMismatch) as none:
        detect(engine)
    assert "note" in one_line(none.value) and "does not exist" in str(none.value)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE note (id INTEGER PRIMARY KEY, title VARCHAR(150))"))
    with pytest.raises(SchemaMismatch) as other:
        detect(engine)
    assert "note.parent_id" in one_line(other.value) and "doughnut-2025" in str(other.value)


def test_an_unknown_schema_name_is_a_configuration_error(engine: Engine) -> None:
    with pytest.raises(ConfigurationError) as info:
        open_source(engine, "doughnut-1999")
    assert "GRAPHRAG_SCHEMA" in one_line(info.value)
