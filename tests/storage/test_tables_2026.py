"""Doughnut 2026's tables and the bundled 2026 sample, on SQLite and on MariaDB.

The expected columns, types and keys below are transcribed from Doughnut's Flyway baseline
(``V100000000__baseline.sql`` at commit b2c0268c09), not from the module under test. The link cache
of the loaded sample is checked against an oracle that resolves every token with SQL over the loaded
database (case folding by the database's own ``LOWER`` on MariaDB), so a wrong row fails here even if
the Python resolver that produced it agrees with itself.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, event, func, insert, inspect, select, text
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import IntegrityError

from storage.database import open_engine
from storage.profiles.sample_2026 import SAMPLE_2026_FOCUS_IDS, load_sample_2026, sample_2026_rows
from storage.profiles.tables_2026 import (
    REQUIRED,
    DatabaseNotEmpty,
    bazaar_notebook,
    circle_user,
    create_tables,
    drop_tables,
    folder,
    missing_columns,
    nonempty_tables,
    note,
    note_wiki_title_cache,
    notebook,
    ownership,
    subscription,
    user,
)
from storage.profiles.wiki_links_2026 import authored_tokens, dedupe_tokens
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
ASCII_FORBIDDEN_IN_NAMES = set('\\/:*?"<>|')
REFERENCE_DAY = dt.datetime(2026, 8, 22)  # Doughnut's reference commit; the sample predates it


@pytest.fixture
def sample_engine(engine: Engine) -> Engine:
    """``engine`` with the 2026 sample loaded."""
    load_sample_2026(engine)
    return engine


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


# -- the sample: loading -------------------------------------------------------------------------
def test_sample_loads_and_round_trips(sample_engine: Engine) -> None:
    rows = sample_2026_rows()
    with sample_engine.connect() as conn:
        for table in (note, folder, notebook, note_wiki_title_cache, subscription, circle_user):
            count = conn.execute(select(func.count()).select_from(table)).scalar()
            assert count == len(rows[table.name])
        stored = {r.id: r for r in conn.execute(select(note))}
    for expected in rows["note"]:
        got = stored[expected["id"]]
        assert (got.title, got.content, got.notebook_id, got.folder_id) == (
            expected["title"], expected["content"], expected["notebook_id"], expected["folder_id"])
        assert got.created_at == expected["created_at"] and got.deleted_at == expected["deleted_at"]


def test_loading_refuses_a_database_with_rows(engine: Engine) -> None:
    create_tables(engine)
    with engine.begin() as conn:
        conn.execute(insert(user).values(id=7, name="someone"))
    with pytest.raises(DatabaseNotEmpty, match="user"):
        load_sample_2026(engine)
    assert nonempty_tables(engine) == ["user"]


def test_sample_rows_are_stable_copies() -> None:
    first = sample_2026_rows()
    first["note"][0]["title"] = "changed"
    assert sample_2026_rows()["note"][0]["title"] != "changed"
    assert sample_2026_rows() == sample_2026_rows()


# -- the sample: the link cache against an SQL oracle ------------------------------------------------
def _unicode_lower(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.create_function("ulower", 1, lambda s: None if s is None else s.lower(),
                                     deterministic=True)


@pytest.fixture
def oracle_conn(sample_engine: Engine) -> Iterator[Connection]:
    """A read connection; on SQLite with ``ulower`` (Unicode ``lower``, like MySQL's LOWER)."""
    if sample_engine.dialect.name != "sqlite":
        with sample_engine.connect() as conn:
            yield conn
        return
    reader = create_engine(sample_engine.url)
    event.listen(reader, "connect", _unicode_lower)
    with reader.connect() as conn:
        yield conn
    reader.dispose()


class SqlOracle:
    """Resolves a token of a note with SQL, restating Doughnut's rules independently."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lower = func.lower if conn.dialect.name != "sqlite" else func.ulower
        self.folders = {r.id: r for r in conn.execute(select(folder))}
        self.notebooks = {r.id: r for r in conn.execute(select(notebook))}

    def trail(self, folder_id: int | None) -> list[str]:
        names: list[str] = []
        while folder_id is not None:
            names.insert(0, self.folders[folder_id].name)
            folder_id = self.folders[folder_id].parent_folder_id
        return names

    def saver(self, notebook_id: int | None) -> int | None:
        if notebook_id is None:
            return None
        own = self.conn.execute(select(ownership).where(
            ownership.c.id == self.notebooks[notebook_id].ownership_id)).one()
        if own.user_id is not None:
            return int(own.user_id)
        return self.conn.execute(select(func.min(circle_user.c.user_id)).where(
            circle_user.c.circle_id == own.circle_id)).scalar()

    def readable(self, user_id: int | None) -> set[int]:
        out = set(self.conn.execute(select(bazaar_notebook.c.notebook_id)).scalars())
        if user_id is None:
            return out
        circles = select(circle_user.c.circle_id).where(circle_user.c.user_id == user_id)
        out |= set(self.conn.execute(select(notebook.c.id).join(
            ownership, ownership.c.id == notebook.c.ownership_id).where(
            (ownership.c.user_id == user_id) | ownership.c.circle_id.in_(circles))).scalars())
        return out | set(self.conn.execute(select(subscription.c.notebook_id).where(
            subscription.c.user_id == user_id)).scalars())

    def resolve(self, row: Any, token: str) -> int | None:
        href = re.fullmatch(r"\[[^\[\]]*\]\((/[^)\s]+)\)", token)
        target = href.group(1) if href else token.split("|", 1)[0]
        colon = target.find(":")
        left, right = target[:colon].strip(), target[colon + 1 :].strip()
        if 0 < colon < len(target) - 1 and left and right:
            book, title = left, right
        elif row.notebook_id is None:
            return None
        else:
            book, title = self.notebooks[row.notebook_id].name, target
        folders: list[str] | None = None
        if ":" not in title and "/" in title:
            parts = [p.strip() for p in title.split("/") if p.strip()]
            if len(parts) >= 2 or title.startswith("/"):
                folders, title = parts[:-1], re.sub(r"(?i)\.md$", "", parts[-1]) if len(parts[-1]) > 3 \
                    else parts[-1]
        moment = row.updated_at if row.deleted_at is None and row.updated_at else row.created_at
        saver_may_read = self.readable(self.saver(row.notebook_id))
        for candidate in self.conn.execute(self._candidates(book, title, moment)):
            on_path = folders is None or [f.lower() for f in self.trail(candidate.folder_id)] == [
                f.lower() for f in folders]
            if on_path and candidate.notebook_id in saver_may_read:
                return int(candidate.id)
        return None

    def _candidates(self, book: str, title: str, moment: dt.datetime) -> Any:
        lower = self.lower
        return (select(note.c.id, note.c.folder_id, note.c.notebook_id)
                .join(notebook, notebook.c.id == note.c.notebook_id)
                .where(lower(note.c.title) == lower(title), lower(notebook.c.name) == lower(book),
                       note.c.created_at <= moment,
                       note.c.deleted_at.is_(None) | (note.c.deleted_at > moment),
                       notebook.c.created_at <= moment,
                       notebook.c.deleted_at.is_(None) | (notebook.c.deleted_at > moment))
                .order_by(note.c.id))


def test_every_cache_row_is_what_doughnut_would_resolve(oracle_conn: Connection) -> None:
    oracle = SqlOracle(oracle_conn)
    stored: dict[int, list[tuple[str, int]]] = {}
    for r in oracle_conn.execute(select(note_wiki_title_cache).order_by(note_wiki_title_cache.c.id)):
        stored.setdefault(r.note_id, []).append((r.link_text, r.target_note_id))
    dead = 0
    for row in oracle_conn.execute(select(note).order_by(note.c.id)):
        resolved = [(t, oracle.resolve(row, t)) for t in dedupe_tokens(authored_tokens(row.content))]
        dead += sum(1 for _, target in resolved if target is None)
        expected = [(t, target) for t, target in resolved if target is not None]
        assert stored.get(row.id, []) == expected, row.title
    assert dead >= 15  # dead links exist, and none of them has a row


# -- the sample: hand-written expectations for the tricky links --------------------------------------
def _find(rows: dict[str, list[dict[str, Any]]], title: str, *, owner: str | None = None,
          folder_name: str | None = None) -> dict[str, Any]:
    owners = {o["id"]: o["user_id"] for o in rows["ownership"]}
    users = {u["id"]: u["external_identifier"] for u in rows["user"]}
    books = {b["id"]: users.get(owners[b["ownership_id"]]) for b in rows["notebook"]}
    folders = {f["id"]: f["name"] for f in rows["folder"]}
    found = [n for n in rows["note"] if n["title"] == title
             and (owner is None or books.get(n["notebook_id"]) == owner)
             and (folder_name is None or folders.get(n["folder_id"]) == folder_name)]
    assert len(found) == 1, (title, owner, folder_name, len(found))
    return found[0]


def test_tricky_links_resolve_as_doughnut_would() -> None:
    rows = sample_2026_rows()
    links: dict[int, list[tuple[str, int]]] = {}
    for r in rows["note_wiki_title_cache"]:
        links.setdefault(r["note_id"], []).append((r["link_text"], r["target_note_id"]))

    def of(title: str, **where: str) -> list[tuple[str, int]]:
        return links.get(_find(rows, title, **where)["id"], [])

    def id_(title: str, **where: str) -> int:
        return int(_find(rows, title, **where)["id"])

    big_o, recursion = id_("Big-O Notation"), id_("Recursion")
    assert of("Dune", owner="ben") == []  # Snow Country was created after this save
    assert of("Big-O Notation") == [("Algorithms/Sorting/Comparison Sorts/Quicksort", id_("Quicksort"))]
    assert of("Recursion") == [("Recursion", recursion)]  # a self-link is a row
    assert of("Hash Table") == [("Computer Science: Big-O Notation", big_o),
                                ("Computer Science:Big-O Notation", big_o)]
    assert of("Notation Quirks") == [("/Recursion.md", recursion)]
    assert of("Queue") == [("[the stack](/Data-Structures/Stack.md)", id_("Stack"))]
    assert of("Frontmatter Links") == [("Stack", id_("Stack")), ("Queue", id_("Queue")),
                                       ("Recursion", recursion)]
    assert of("Dijkstra's Algorithm") == [
        ("Algorithms/Overview", id_("Overview", folder_name="Algorithms")),
        ("Overview", min(n["id"] for n in rows["note"] if n["title"] == "Overview"))]
    assert of("Miso Soup")[-1] == ("reading list: dune", id_("Dune", owner="ben"))
    assert ("Reading List: Dune", id_("Dune", owner="ada")) in of("Study Plan 2025")
    assert of("Reading Log") == [("LES MISÉRABLES", id_("Les Misérables")),
                                 ("dune", id_("Dune", owner="ada"))]
    assert of("Sorting Cheat Sheet")[2] == ("Bubble Sort", id_("Bubble Sort"))
    for title in ("Radix Sort", "雪国", "Kanji Game", "はし", "What is O(1)？", "Orphaned Note",
                  "Half-baked Idea"):
        assert of(title) == [], title
    assert [t for t, _ in of("First Meetup")] == ["ברכות Greetings"]
    assert [t for t, _ in of("Drafts Index, Later")] == ["Spaced Repetition"]
    assert [t for t, _ in of("Drafts Index")] == ["Old Drafts: Half-baked Idea"]


# -- the sample: features --------------------------------------------------------------------------
def _cjk(text: str) -> int:
    return sum(1 for ch in text if unicodedata.name(ch, "").startswith(("CJK", "HIRAGANA", "KATAKANA")))


def _stats(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    notes = {n["id"]: n for n in rows["note"]}
    live = {i for i, n in notes.items() if n["deleted_at"] is None}
    cache = rows["note_wiki_title_cache"]
    depth: dict[int | None, int] = {None: 0}
    for f in rows["folder"]:
        depth[f["id"]] = depth[f["parent_folder_id"]] + 1
    return {
        "notes": notes, "live": live, "cache": cache, "depth": depth,
        "referrers": Counter(t for t, _ in {(r["target_note_id"], r["note_id"]) for r in cache
                                             if r["note_id"] in live and r["target_note_id"] in live}),
        "folder_sizes": Counter(n["folder_id"] for n in notes.values() if n["folder_id"] is not None),
    }


def test_sample_has_the_people_and_sharing_of_a_real_doughnut() -> None:
    rows = sample_2026_rows()
    owner_user = {o["id"]: o["user_id"] for o in rows["ownership"]}
    by_owner = Counter(owner_user[b["ownership_id"]] for b in rows["notebook"])
    first_user, owned = by_owner.most_common(1)[0]
    assert len(rows["user"]) >= 3 and owned * 2 > len(rows["notebook"])
    subscriber = [s for s in rows["subscription"]
                  if owner_user[rows["notebook"][s["notebook_id"] - 1]["ownership_id"]] == first_user]
    assert subscriber and by_owner[subscriber[0]["user_id"]] >= 1
    circle_books = [b for b in rows["notebook"] if owner_user[b["ownership_id"]] is None]
    assert circle_books and len(rows["circle_user"]) >= 2
    assert rows["bazaar_notebook"]
    assert any(b["deleted_at"] is not None for b in rows["notebook"])


def test_sample_has_the_shapes_the_service_must_handle() -> None:
    rows = sample_2026_rows()
    s = _stats(rows)
    notes, cache = s["notes"], s["cache"]
    contents = [n["content"] for n in notes.values()]
    assert max(s["depth"].values()) >= 3
    assert max(s["folder_sizes"].values()) >= 300
    assert max(s["referrers"].values()) >= 100
    at_root = [n for n in notes.values() if n["folder_id"] is None and n["notebook_id"] is not None]
    assert len(at_root) >= 10
    assert any(n["notebook_id"] is None for n in notes.values())
    assert sum(1 for c in contents if c and c.startswith("---\ntype: Note\n---\n")) > 0.9 * len(contents)
    assert None in contents and "" in contents
    assert max(len((c or "").encode()) for c in contents) >= 100 * 1024
    assert any(len(n["title"]) == 150 and _cjk(n["title"]) > 120 for n in notes.values())
    assert any(re.search("[\u0590-\u05ff]", c or "") and re.search("[\u0600-\u06ff]", c or "")
               for c in contents)  # Hebrew and Arabic: right to left
    assert any("\u200d" in (c or "") for c in contents)  # an emoji ZWJ sequence
    assert any("🍩" in n["title"] for n in notes.values())
    assert sum(1 for n in notes.values() if n["deleted_at"] is not None) >= 3
    assert any(notes[r["target_note_id"]]["deleted_at"] is not None for r in cache)  # rows kept
    assert any(notes[r["note_id"]]["deleted_at"] is not None for r in cache)
    assert any(r["note_id"] == r["target_note_id"] for r in cache)


def test_sample_links_come_in_every_syntax() -> None:
    rows = sample_2026_rows()
    notes = {n["id"]: n for n in rows["note"]}
    texts = [(r, notes[r["note_id"]], notes[r["target_note_id"]])
             for r in rows["note_wiki_title_cache"]]
    assert any("|" in r["link_text"] for r, _, _ in texts)
    qualified = [r for r, a, b in texts
                 if ":" in r["link_text"] and a["notebook_id"] != b["notebook_id"]]
    assert len(qualified) >= 20
    assert any("/" in r["link_text"] and ":" not in r["link_text"] for r, _, _ in texts)
    assert any(r["link_text"].startswith("[") for r, _, _ in texts)  # a Markdown path link
    assert any(f"```python\n# the in-place alternative is [[{r['link_text']}]]" in (a["content"] or "")
               for r, a, _ in texts)


def test_relationship_notes_link_both_endpoints_in_order() -> None:
    rows = sample_2026_rows()
    first_two: dict[int, list[int]] = {}
    for r in rows["note_wiki_title_cache"]:
        first_two.setdefault(r["note_id"], []).append(r["target_note_id"])
    titles = {n["id"]: n["title"] for n in rows["note"]}
    relations = [n for n in rows["note"] if (n["content"] or "").startswith("---\ntype: Relationship\n")]
    assert len(relations) >= 5
    for n in relations:
        relation = re.search(r"^relation: (.*)$", n["content"], re.M)
        assert relation and re.fullmatch(r"[a-z]+(-[a-z]+)*", relation.group(1))
        source, target = (titles[i] for i in first_two[n["id"]][:2])
        assert n["title"] == f"{source} {relation.group(1).replace('-', ' ')} {target}"


def test_titles_and_names_obey_doughnuts_rules() -> None:
    rows = sample_2026_rows()
    keys = Counter((n["notebook_id"], n["folder_id"], n["title"].lower()) for n in rows["note"])
    assert max(keys.values()) == 1
    places = Counter((f["notebook_id"], f["parent_folder_id"], f["name"]) for f in rows["folder"])
    assert max(places.values()) == 1
    names = [n["title"] for n in rows["note"]] + [f["name"] for f in rows["folder"]]
    names += [b["name"] for b in rows["notebook"]]
    for name in names:
        assert name == name.strip() and name and len(name) <= 150, name
        assert not ASCII_FORBIDDEN_IN_NAMES & set(name) and all(ord(ch) >= 32 for ch in name), name
    assert any("｜" in t or "？" in t for t in names) and any("+" in t or "#" in t for t in names)


def test_sample_time_flows_forward() -> None:
    rows = sample_2026_rows()
    created = [n["created_at"] for n in rows["note"]]
    assert created == sorted(set(created)) and created[-1] < REFERENCE_DAY
    for n in rows["note"]:
        assert n["created_at"].microsecond == 0
        assert n["deleted_at"] is None or n["created_at"] < n["deleted_at"] < REFERENCE_DAY
        assert n["updated_at"] >= n["created_at"]
    first_note: dict[int | None, dt.datetime] = {}
    for n in rows["note"]:
        first_note.setdefault(n["notebook_id"], n["created_at"])
    assert all(b["created_at"] < first_note[b["id"]] for b in rows["notebook"])


def test_focus_ids_name_notes_with_their_property() -> None:
    rows = sample_2026_rows()
    s = _stats(rows)
    notes, ids = s["notes"], SAMPLE_2026_FOCUS_IDS
    assert set(ids.values()) <= s["live"]
    assert s["referrers"][ids["hub"]] >= 100
    assert s["folder_sizes"][notes[ids["big_folder_note"]]["folder_id"]] >= 300
    assert s["depth"][notes[ids["deep_folder_note"]]["folder_id"]] == max(s["depth"].values())
    crossing = [r for r in s["cache"] if r["note_id"] == ids["cross_notebook_linker"]
                and notes[r["target_note_id"]]["notebook_id"] != notes[r["note_id"]]["notebook_id"]]
    assert len(crossing) >= 3
    assert any(notes[r["target_note_id"]]["deleted_at"] is not None
               for r in s["cache"] if r["note_id"] == ids["deleted_target_linker"])
    subscribed = {x["notebook_id"] for x in rows["subscription"]}
    assert notes[ids["subscriber_visible_note"]]["notebook_id"] in subscribed
    assert sum(1 for ch in notes[ids["cjk_note"]]["content"] if "\u4e00" <= ch <= "\u9fff") >= 100
