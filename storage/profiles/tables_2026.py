"""Doughnut's 2026 tables (folders and wiki links), in SQLAlchemy Core, as Doughnut declares them.

Source of truth: Doughnut's squashed Flyway baseline ``V100000000__baseline.sql`` at commit
b2c0268c09 (the later migrations V300000300/V300000301 touch none of these tables) and its JPA
entities. Names, types, nullability, defaults, keys and foreign keys are Doughnut's on MySQL and
MariaDB (``with_variant``: INT UNSIGNED, TIMESTAMP / TIMESTAMP(3), MEDIUMTEXT, TINYINT and
``utf8mb4_bin`` titles and names); SQLite gets the generic types.

Invariants this module keeps:

* Every column exists in Doughnut. Columns the service does not read are nullable or have a server
  default, so demo inserts may leave them out. Four Doughnut columns are ``NOT NULL`` without a
  default and unread by the service; they are **nullable here**: ``user.name``,
  ``user.external_identifier``, ``circle.name`` and ``notebook.creator_id``.
* Indexes the reads rely on are Doughnut's, by name: ``idx_note_structural_peer``
  (notebook_id, folder_id, deleted_at, id) for folder peers and
  ``idx_note_wiki_title_cache_target_note_id_note_id`` (target_note_id, note_id, id) for inbound
  links, plus every plain unique key.
* Doughnut's three functional keys cannot be declared portably: MariaDB has no functional key parts.
  They are created **on SQLite only**, where expression indexes exist
  (``uk_note_notebook_folder_title`` on (ifnull(notebook_id,0), ifnull(folder_id,0), lower(title)),
  ``idx_note_notebook_id_title`` on (notebook_id, lower(title)) and ``uk_folder_notebook_parent_name``
  on (notebook_id, ifnull(parent_folder_id,0), name)); SQLite's ``lower`` folds ASCII only, so there
  they reject a subset of what MySQL would. On MySQL/MariaDB the loaders keep those keys themselves.
* Foreign keys follow Doughnut among these tables; those into tables not modelled here (``image``,
  ``notebook_group``) are left out, the columns kept.
* ``ON UPDATE CURRENT_TIMESTAMP`` on ``note.updated_at`` and ``folder.updated_at`` is added by an
  ``ALTER`` after creation on MySQL/MariaDB only (SQLite has no such clause).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    event,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection, Engine

from graphrag.core.errors import GraphRagError
from storage.database import translated

__all__ = [
    "REQUIRED",
    "DatabaseNotEmpty",
    "bazaar_notebook",
    "circle",
    "circle_user",
    "create_tables",
    "drop_tables",
    "folder",
    "metadata",
    "missing_columns",
    "nonempty_tables",
    "note",
    "note_wiki_title_cache",
    "notebook",
    "ownership",
    "subscription",
    "user",
    "user_token",
]

_MYSQL = ("mysql", "mariadb")
_UINT = Integer().with_variant(mysql.INTEGER(unsigned=True), *_MYSQL)
_TINY = SmallInteger().with_variant(mysql.TINYINT(), *_MYSQL)
_BOOL1 = SmallInteger().with_variant(mysql.TINYINT(display_width=1), *_MYSQL)
_TS = DateTime().with_variant(mysql.TIMESTAMP(), *_MYSQL)
_TS3 = DateTime().with_variant(mysql.TIMESTAMP(fsp=3), *_MYSQL)
_MEDIUMTEXT = Text().with_variant(mysql.MEDIUMTEXT(), *_MYSQL)
_MEDIUMTEXT_UNICODE = Text().with_variant(mysql.MEDIUMTEXT(collation="utf8mb4_unicode_ci"), *_MYSQL)
_NOW = text("CURRENT_TIMESTAMP")


def _varchar(length: int, collation: str | None = None) -> String:
    return String(length).with_variant(mysql.VARCHAR(length, collation=collation), *_MYSQL)


_UTF8MB4: dict[str, Any] = {"mysql_engine": "InnoDB", "mysql_charset": "utf8mb4"}
_UNICODE_CI: dict[str, Any] = {**_UTF8MB4, "mysql_collate": "utf8mb4_unicode_ci"}

metadata = MetaData()

user = Table(
    "user", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("name", _varchar(100), nullable=True),  # NOT NULL in Doughnut; unread here
    Column("external_identifier", _varchar(100), nullable=True),  # NOT NULL in Doughnut; unread
    Column("daily_assimilation_count", _UINT, nullable=False, server_default="10"),
    Column("health_remove_empty_folders_default", _BOOL1, nullable=False, server_default="0"),
    UniqueConstraint("external_identifier", name="user_external_identifier"),
    **_UTF8MB4,
)

circle = Table(
    "circle", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("name", _varchar(255, "utf8mb4_bin"), nullable=True),  # NOT NULL in Doughnut; unread
    Column("invitation_code", _varchar(20), nullable=True),
    UniqueConstraint("invitation_code", name="invitation_code"),
    **_UTF8MB4,
)

circle_user = Table(
    "circle_user", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("user_id", _UINT, ForeignKey("user.id", name="fk_circle_user_user_id", ondelete="CASCADE"),
           nullable=False),
    Column("circle_id", _UINT,
           ForeignKey("circle.id", name="fk_circle_user_circle_id", ondelete="CASCADE"), nullable=False),
    UniqueConstraint("circle_id", "user_id", name="circle_user_circle_user_id"),
    Index("fk_circle_user_user_id", "user_id"),
    **_UTF8MB4,
)

ownership = Table(
    "ownership", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("user_id", _UINT, ForeignKey("user.id", name="fk_ownership_user_id", ondelete="CASCADE"),
           nullable=True),
    Column("circle_id", _UINT,
           ForeignKey("circle.id", name="fk_ownership_circle_id", ondelete="CASCADE"), nullable=True),
    UniqueConstraint("user_id", name="ownership_user_id"),
    UniqueConstraint("circle_id", name="ownership_circle_id"),
    **_UTF8MB4,
)

notebook = Table(
    "notebook", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("ownership_id", _UINT,
           ForeignKey("ownership.id", name="fk_notes_book_ownership_id", ondelete="CASCADE"),
           nullable=False),
    Column("creator_id", _UINT,  # NOT NULL in Doughnut; unread here
           ForeignKey("user.id", name="fk_notes_book_creator_id", ondelete="CASCADE"), nullable=True),
    Column("skip_memory_tracking_entirely", _TINY, nullable=False, server_default="0"),
    Column("deleted_at", _TS, nullable=True),
    Column("updated_at", _TS, nullable=True, server_default=_NOW),
    Column("created_at", _TS, nullable=False, server_default=_NOW),
    Column("notebook_group_id", _UINT, nullable=True),  # FK to notebook_group (not modelled)
    Column("description", _varchar(500), nullable=True),
    Column("name", _varchar(150, "utf8mb4_bin"), nullable=False),
    Column("readme_content", _MEDIUMTEXT_UNICODE, nullable=True),
    UniqueConstraint("ownership_id", "name", name="uk_notebook_ownership_name"),
    Index("fk_notes_book_creator_id", "creator_id"),
    Index("fk_notes_book_ownership_id", "ownership_id"),
    Index("fk_notebook_notebook_group", "notebook_group_id"),
    CheckConstraint("length(trim(name)) > 0", name="chk_notebook_name_nonempty"),
    **_UTF8MB4,
)

folder = Table(
    "folder", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("notebook_id", _UINT,
           ForeignKey("notebook.id", name="fk_folder_notebook", ondelete="CASCADE"), nullable=False),
    Column("parent_folder_id", _UINT,
           ForeignKey("folder.id", name="fk_folder_parent", ondelete="CASCADE"), nullable=True),
    Column("name", _varchar(512, "utf8mb4_bin"), nullable=False),
    Column("created_at", _TS, nullable=False, server_default=_NOW),
    Column("updated_at", _TS, nullable=False, server_default=_NOW),  # + ON UPDATE on MySQL
    Column("readme_content", _MEDIUMTEXT_UNICODE, nullable=True),
    Index("idx_folder_notebook_id", "notebook_id"),
    Index("idx_folder_parent_folder_id", "parent_folder_id"),
    **_UNICODE_CI,
)

note = Table(
    "note", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("picture_url", _varchar(1024), nullable=True),
    Column("url", _varchar(1024), nullable=True),
    Column("image_id", _UINT, nullable=True),  # FK to image (not modelled)
    Column("notebook_id", _UINT, ForeignKey("notebook.id", name="fk_note_notebook_id"), nullable=True),
    Column("folder_id", _UINT,
           ForeignKey("folder.id", name="fk_note_folder", ondelete="SET NULL"), nullable=True),
    Column("updated_at", _TS, nullable=True, server_default=_NOW),  # + ON UPDATE on MySQL
    Column("deleted_at", _TS3, nullable=True),
    Column("title", _varchar(150, "utf8mb4_bin"), nullable=False),
    Column("content", _MEDIUMTEXT, nullable=True),
    Column("level", _TINY, nullable=False, server_default="0"),
    Column("created_at", _TS, nullable=False, server_default=_NOW),
    Index("fk_note_image_id", "image_id"),
    Index("fk_note_notebook_id", "notebook_id"),
    Index("idx_note_folder_id", "folder_id"),
    Index("idx_note_structural_peer", "notebook_id", "folder_id", "deleted_at", "id"),
    **_UTF8MB4,
)

note_wiki_title_cache = Table(
    "note_wiki_title_cache", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("note_id", _UINT,
           ForeignKey("note.id", name="fk_note_wiki_title_cache_note", ondelete="CASCADE"),
           nullable=False),
    Column("target_note_id", _UINT,
           ForeignKey("note.id", name="fk_note_wiki_title_cache_target", ondelete="CASCADE"),
           nullable=False),
    Column("link_text", _varchar(767, "utf8mb4_bin"), nullable=False),
    UniqueConstraint("note_id", "link_text", name="uq_note_wiki_title_cache_note_link"),
    Index("idx_note_wiki_title_cache_note_id", "note_id"),
    Index("idx_note_wiki_title_cache_target_note_id", "target_note_id"),
    Index("idx_note_wiki_title_cache_target_note_id_note_id", "target_note_id", "note_id", "id"),
    **_UNICODE_CI,
)

subscription = Table(
    "subscription", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("user_id", _UINT,
           ForeignKey("user.id", name="fk_subscription_user_id", ondelete="CASCADE"), nullable=False),
    Column("daily_target_of_new_notes", _UINT, nullable=False, server_default="5"),
    Column("notebook_id", _UINT, ForeignKey("notebook.id", name="fk_subscription_notebook_id"),
           nullable=True),
    Column("notebook_group_id", _UINT, nullable=True),  # FK to notebook_group (not modelled)
    UniqueConstraint("user_id", "notebook_id", name="subscription_user_notebook"),
    Index("fk_subscription_notebook_id", "notebook_id"),
    Index("fk_subscription_notebook_group", "notebook_group_id"),
    **_UTF8MB4,
)

#: Doughnut's access tokens (read only with GRAPHRAG_READER_AUTH=doughnut|both; not in REQUIRED)
user_token = Table(
    "user_token", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("user_id", _UINT, ForeignKey("user.id", name="user_token_ibfk_1", ondelete="CASCADE"),
           nullable=False),
    Column("token", _varchar(255, "utf8mb4_unicode_ci"), nullable=False),
    Column("label", _varchar(255), nullable=True),
    Column("last_used_at", _TS3, nullable=True),
    Column("expires_at", _TS, nullable=True),
    UniqueConstraint("token", name="token"),
    Index("user_id", "user_id"),
    **_UTF8MB4,
)

bazaar_notebook = Table(
    "bazaar_notebook", metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("notebook_id", _UINT, ForeignKey("notebook.id", name="fk_bazaar_notebook_notebook_id"),
           nullable=True),
    Index("fk_bazaar_notebook_notebook_id", "notebook_id"),
    **_UTF8MB4,
)

# Doughnut's functional keys: SQLite only (see the module docstring).
Index("uk_note_notebook_folder_title", func.ifnull(note.c.notebook_id, 0),
      func.ifnull(note.c.folder_id, 0), func.lower(note.c.title), unique=True).ddl_if(dialect="sqlite")
Index("idx_note_notebook_id_title", note.c.notebook_id,
      func.lower(note.c.title)).ddl_if(dialect="sqlite")
Index("uk_folder_notebook_parent_name", folder.c.notebook_id, func.ifnull(folder.c.parent_folder_id, 0),
      folder.c.name, unique=True).ddl_if(dialect="sqlite")



def _touch_on_update(table: Table, nullability: str) -> None:
    """Give ``table.updated_at`` Doughnut's ``ON UPDATE CURRENT_TIMESTAMP`` on MySQL/MariaDB."""
    statement = (f"ALTER TABLE `{table.name}` MODIFY `updated_at` TIMESTAMP {nullability} "
                 "DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP")

    def alter(_target: Table, connection: Connection, **_: Any) -> None:
        if connection.dialect.name in _MYSQL:
            connection.exec_driver_sql(statement)

    event.listen(table, "after_create", alter)


_touch_on_update(note, "NULL")
_touch_on_update(folder, "NOT NULL")

#: Per table, the columns the service reads: what a schema check compares a database against.
REQUIRED: dict[str, tuple[str, ...]] = {
    "note": ("id", "notebook_id", "folder_id", "title", "content", "created_at", "deleted_at"),
    "folder": ("id", "notebook_id", "parent_folder_id", "name"),
    "notebook": ("id", "name", "ownership_id"),
    "note_wiki_title_cache": ("id", "note_id", "target_note_id", "link_text"),
    "ownership": ("id", "user_id", "circle_id"),
    "subscription": ("user_id", "notebook_id"),
    "circle_user": ("circle_id", "user_id"),
    "bazaar_notebook": ("notebook_id",),
}


class DatabaseNotEmpty(GraphRagError):
    """A loader that fills an empty database found rows in some of the 2026 tables."""


def create_tables(engine: Engine) -> None:
    """Create every missing table of this profile (existing tables are left as they are)."""
    with translated("cannot create the doughnut-2026 tables"):
        metadata.create_all(engine, checkfirst=True)


def drop_tables(engine: Engine) -> None:
    """Drop this profile's tables (for tests and demo resets; never against Doughnut's database)."""
    metadata.drop_all(engine, checkfirst=True)


def missing_columns(engine: Engine) -> dict[str, list[str]]:
    """Per table of :data:`REQUIRED`, the required columns the database lacks (a missing table
    lacks them all); empty when the database has everything the service reads."""
    found = inspect(engine)
    tables = set(found.get_table_names())
    out: dict[str, list[str]] = {}
    for name, needed in REQUIRED.items():
        have = {c["name"] for c in found.get_columns(name)} if name in tables else set()
        lacking = [c for c in needed if c not in have]
        if lacking:
            out[name] = lacking
    return out


def nonempty_tables(engine: Engine) -> list[str]:
    """Names of this profile's existing tables that hold at least one row, in creation order."""
    present = set(inspect(engine).get_table_names())
    with engine.connect() as conn:
        return [t.name for t in metadata.sorted_tables
                if t.name in present and conn.execute(select(1).select_from(t).limit(1)).first()]
