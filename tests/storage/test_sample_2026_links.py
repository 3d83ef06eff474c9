"""The link cache (``note_wiki_title_cache``) of the bundled Doughnut 2026 sample.

Every row of the loaded sample (SQLite and MariaDB) is checked against an oracle that resolves every
token with SQL over the loaded database (case folding by the database's own ``LOWER`` on MariaDB), so
a wrong row fails here even if the Python resolver that produced it agrees with itself; the tricky
links also have hand-written expectations.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, event, func, select
from sqlalchemy.engine import Connection, Engine

from storage.profiles.sample_2026 import sample_2026_rows
from storage.profiles.tables_2026 import (
    bazaar_notebook,
    circle_user,
    folder,
    note,
    note_wiki_title_cache,
    notebook,
    ownership,
    subscription,
)
from storage.profiles.wiki_links_2026 import authored_tokens, dedupe_tokens


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
