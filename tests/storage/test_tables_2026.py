"""Doughnut 2026's tables, on SQLite and on MariaDB.

The expected columns, types and keys below are transcribed from Doughnut's Flyway baseline
(``V100000000__baseline.sql`` at commit b2c0268c09), not from the module under test, so a column, a
type, a collation or a key the module gets wrong fails here; the foreign keys act as Doughnut's do and
SQLite enforces Doughnut's functional unique keys too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import insert, inspect, select, text
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import IntegrityError

from storage.database import open_engine
from storage.profiles.sample_2026 import load_sample_2026, sample_2026_rows
from storage.profiles.tables_2026 import (
    REQUIRED,
    create_tables,
    drop_tables,
    folder,
    missing_columns,
    note,
    note_wiki_title_cache,
    notebook,
    ownership,
    subscription,
    user,
)
from tests.conftest import url_string

# -- Doughnut's DDL, transcribed -------------------------------------------------------------------
DOUGHNUT_COLUMNS = {
    "note": {"id", "picture_url", "url", "image_id", "notebook_id", "folder_id", "updated_at",
             "deleted_at", "title", "content", "level", "created_at"},
    "folder": {"id", "notebook_id", "parent_folder_id", "name", "created_at", "updated_at",
               "readme_content"},
    "notebook": {"id", "ownership_id", "creator_id", "skip_memory_tracking_entirely", "deleted_at",
                 "updated_at", "created_at", "notebook_group_id", "description", "name",
                 "readme_content"},
    "note_wiki_title_cache": {"id", "note_id", "target_note_id", "link_text"},
    "ownership": {"id", "user_id", "circle_id"},
    "subscription": {"id", "user_id", "daily_target_of_new_notes", "notebook_id", "notebook_group_id"},
    "circle": {"id", "name", "invitation_code"},
    "circle_user": {"id", "user_id", "circle_id"},
    "bazaar_notebook": {"id", "notebook_id"},
    "user": {"id", "name", "external_identifier", "daily_assimilation_count",
             "health_remove_empty_folders_default"},
}
#: (table, column) -> (MariaDB COLUMN_TYPE, nullable, collation or None)
MARIADB_TYPES = {
    ("note", "id"): ("int(10) unsigned", False, None),
    ("note", "notebook_id"): ("int(10) unsigned", True, None),
    ("note", "folder_id"): ("int(10) unsigned", True, None),
    ("note", "title"): ("varchar(150)", False, "utf8mb4_bin"),
    ("note", "content"): ("mediumtext", True, "*"),
    ("note", "created_at"): ("timestamp", False, None),
    ("note", "updated_at"): ("timestamp", True, None),
    ("note", "deleted_at"): ("timestamp(3)", True, None),
    ("note", "level"): ("tinyint(4)", False, None),
    ("folder", "notebook_id"): ("int(10) unsigned", False, None),
    ("folder", "parent_folder_id"): ("int(10) unsigned", True, None),
    ("folder", "name"): ("varchar(512)", False, "utf8mb4_bin"),
    ("folder", "readme_content"): ("mediumtext", True, "utf8mb4_unicode_ci"),
    ("notebook", "name"): ("varchar(150)", False, "utf8mb4_bin"),
    ("notebook", "ownership_id"): ("int(10) unsigned", False, None),
    ("notebook", "deleted_at"): ("timestamp", True, None),
    ("note_wiki_title_cache", "note_id"): ("int(10) unsigned", False, None),
    ("note_wiki_title_cache", "target_note_id"): ("int(10) unsigned", False, None),
    ("note_wiki_title_cache", "link_text"): ("varchar(767)", False, "utf8mb4_bin"),
    ("ownership", "user_id"): ("int(10) unsigned", True, None),
    ("ownership", "circle_id"): ("int(10) unsigned", True, None),
    ("subscription", "user_id"): ("int(10) unsigned", False, None),
    ("subscription", "daily_target_of_new_notes"): ("int(10) unsigned", False, None),
    ("circle", "name"): ("varchar(255)", True, "utf8mb4_bin"),
}
#: index name -> (table, columns in order, unique)
DOUGHNUT_INDEXES = {
    "idx_note_structural_peer": ("note", ["notebook_id", "folder_id", "deleted_at", "id"], False),
    "idx_note_folder_id": ("note", ["folder_id"], False),
    "fk_note_notebook_id": ("note", ["notebook_id"], False),
    "idx_note_wiki_title_cache_target_note_id_note_id":
        ("note_wiki_title_cache", ["target_note_id", "note_id", "id"], False),
    "idx_note_wiki_title_cache_note_id": ("note_wiki_title_cache", ["note_id"], False),
    "uq_note_wiki_title_cache_note_link": ("note_wiki_title_cache", ["note_id", "link_text"], True),
    "idx_folder_parent_folder_id": ("folder", ["parent_folder_id"], False),
    "uk_notebook_ownership_name": ("notebook", ["ownership_id", "name"], True),
    "subscription_user_notebook": ("subscription", ["user_id", "notebook_id"], True),
    "circle_user_circle_user_id": ("circle_user", ["circle_id", "user_id"], True),
    "ownership_user_id": ("ownership", ["user_id"], True),
    "ownership_circle_id": ("ownership", ["circle_id"], True),
    "user_external_identifier": ("user", ["external_identifier"], True),
}


# -- tables ----------------------------------------------------------------------------------------
def test_tables_have_exactly_doughnuts_columns(engine: Engine) -> None:
    create_tables(engine)
    found = inspect(engine)
    assert {t: {c["name"] for c in found.get_columns(t)} for t in DOUGHNUT_COLUMNS} == DOUGHNUT_COLUMNS
    assert missing_columns(engine) == {}
    assert all(set(cols) <= DOUGHNUT_COLUMNS[t] for t, cols in REQUIRED.items())


def test_unread_columns_may_be_left_out_of_inserts(engine: Engine) -> None:
    create_tables(engine)
    read = {(t, c) for t, cols in REQUIRED.items() for c in cols} | {(t, "id") for t in DOUGHNUT_COLUMNS}
    for table in (note, folder, notebook, note_wiki_title_cache, ownership, subscription, user):
        for column in table.columns:
            if (table.name, column.name) not in read:
                assert column.nullable or column.server_default is not None, (table.name, column.name)


@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
def test_doughnuts_indexes_and_keys_exist(engine: Engine) -> None:
    create_tables(engine)
    found = inspect(engine)
    for name, (table, columns, unique) in DOUGHNUT_INDEXES.items():
        keys = [dict(i, unique=bool(i.get("unique"))) for i in found.get_indexes(table)]
        keys += [dict(u, unique=True) for u in found.get_unique_constraints(table)]
        match = [k for k in keys if k["name"] == name]
        assert match, f"{table}.{name} missing"
        assert match[0]["column_names"] == columns and match[0]["unique"] == unique, name


def test_missing_columns_names_what_a_database_lacks(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE note (id INTEGER PRIMARY KEY, title VARCHAR(150), "
                          "content TEXT, created_at TIMESTAMP NULL)"))
    lacking = missing_columns(engine)
    assert lacking["note"] == ["notebook_id", "folder_id", "deleted_at"]
    assert set(lacking) == set(REQUIRED)  # every other table is missing entirely
    assert lacking["folder"] == list(REQUIRED["folder"])


@pytest.mark.mariadb
def test_mariadb_types_collations_and_on_update(mariadb_url: URL) -> None:
    engine = open_engine(url_string(mariadb_url))
    try:
        create_tables(engine)
        with engine.connect() as conn:
            rows = conn.execute(text(
                "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLLATION_NAME, EXTRA "
                "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()")).all()
        by_column = {(r[0], r[1]): r for r in rows}
        for key, (column_type, nullable, collation) in MARIADB_TYPES.items():
            row = by_column[key]
            assert (row[2], row[3] == "YES") == (column_type, nullable), key
            if collation is not None and collation != "*":
                assert row[4] == collation, key
        assert "on update" in by_column[("note", "updated_at")][5].lower()
        assert "on update" in by_column[("folder", "updated_at")][5].lower()
    finally:
        drop_tables(engine)
        engine.dispose()


@pytest.mark.mariadb
def test_mariadb_foreign_keys_act_like_doughnuts(mariadb_url: URL) -> None:
    engine = open_engine(url_string(mariadb_url))
    try:
        load_sample_2026(engine)
        rows = sample_2026_rows()
        cached = next(r for r in rows["note_wiki_title_cache"])
        in_folder = next(n for n in rows["note"] if n["folder_id"] is not None)
        with engine.begin() as conn:
            conn.execute(note_wiki_title_cache.delete().where(
                note_wiki_title_cache.c.target_note_id == cached["target_note_id"]))
            conn.execute(note.delete().where(note.c.id == cached["target_note_id"]))
            conn.execute(folder.delete().where(folder.c.id == in_folder["folder_id"]))
            folder_now = conn.execute(
                select(note.c.folder_id).where(note.c.id == in_folder["id"])).scalar()
            with pytest.raises(IntegrityError):
                conn.execute(insert(note_wiki_title_cache).values(note_id=10**6, target_note_id=1,
                                                                  link_text="x"))
        assert folder_now is None  # ON DELETE SET NULL, as in Doughnut
    finally:
        drop_tables(engine)
        engine.dispose()


def test_sqlite_enforces_doughnuts_functional_unique_keys(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'k.db'}")
    create_tables(engine)
    with engine.connect() as conn:
        ddl = {r.name: r.sql for r in conn.execute(
            text("SELECT name, sql FROM sqlite_master WHERE type = 'index'"))}
    assert "lower(title)" in ddl["uk_note_notebook_folder_title"]
    assert "ifnull(parent_folder_id, 0)" in ddl["uk_folder_notebook_parent_name"]
    assert "lower(title)" in ddl["idx_note_notebook_id_title"]
    with engine.begin() as conn:
        conn.execute(insert(user).values(id=1))
        conn.execute(insert(ownership).values(id=1, user_id=1))
        conn.execute(insert(notebook).values(id=1, ownership_id=1, name="NB"))
        conn.execute(insert(note).values(id=1, notebook_id=1, title="Dune"))
        conn.execute(insert(note).values(id=2, notebook_id=2, title="dune"))  # another notebook
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert(note).values(id=3, notebook_id=1, title="DUNE"))
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert(notebook).values(id=2, ownership_id=1, name="   "))  # the name check
    engine.dispose()
