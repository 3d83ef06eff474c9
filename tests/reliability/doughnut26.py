"""Doughnut 2026's write paths, applied to its tables in a test database (the storm and CDC suites).

:class:`Doughnut26` edits the tables the way Doughnut does (a content edit rewrites the note and its
``note_wiki_title_cache`` rows; a title rename rewrites every referrer's content; moves change
``folder_id``; deletes and undo set and clear ``deleted_at``; folders are renamed and moved; notebooks
renamed; new notes land in folders whose capped peer lists are not full yet), each edit in one
transaction, and returns the events an operator's relay would post for it.
"""

from __future__ import annotations

import datetime as dt
import random
import uuid
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine

from tests.reliability.harness import now_iso

__all__ = ["Doughnut26"]


# -- Doughnut's write paths --------------------------------------------------------------------------
class Doughnut26:
    """Edits the 2026 tables as Doughnut does; each edit returns the events the relay posts."""

    def __init__(self, engine: Engine, rng: random.Random) -> None:
        self.engine, self.rng = engine, rng

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(sql), params))

    def run(self, *statements: tuple[str, dict[str, Any]]) -> None:
        with self.engine.begin() as conn:  # one transaction, as Doughnut's service method
            for sql, params in statements:
                conn.execute(text(sql), params)

    def next_id(self, table: str) -> int:
        return int(self.rows(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}")[0][0])

    def notes(self) -> list[int]:
        return [r[0] for r in self.rows("SELECT id FROM note WHERE notebook_id IS NOT NULL ORDER BY id")]

    def place(self, note: int) -> dict[str, Any]:
        folder, book = self.rows("SELECT folder_id, notebook_id FROM note WHERE id = :n", n=note)[0]
        links = [r[0] for r in self.rows(
            "SELECT target_note_id FROM note_wiki_title_cache WHERE note_id = :n ORDER BY id", n=note)]
        return {"folderId": folder, "notebookId": book, "linkTargets": links}

    def event(self, kind: str, note: int, before: dict[str, Any] | None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": kind, "noteId": note, "occurredAt": now_iso()}
        if kind != "note.deleted":
            out["after"] = self.place(note)
        return out | ({"before": before} if before is not None else {})

    def links_of(self, note: int, targets: list[int]) -> list[tuple[str, dict[str, Any]]]:
        first = self.next_id("note_wiki_title_cache")
        return [("DELETE FROM note_wiki_title_cache WHERE note_id = :n", {"n": note}),
                *(("INSERT INTO note_wiki_title_cache (id, note_id, target_note_id, link_text) "
                   "VALUES (:i, :n, :t, :l)", {"i": first + k, "n": note, "t": t, "l": f"L{t}"})
                  for k, t in enumerate(targets))]

    # -- the edits ----------------------------------------------------------------------------------
    def relink(self, note: int) -> list[dict[str, Any]]:
        """A content edit adding and removing wiki links."""
        before, pool = self.place(note), self.notes()
        targets = self.rng.sample(pool, min(len(pool), self.rng.randrange(4)))
        links = " ".join(f"[[L{t}]]" for t in targets)
        content = f"---\ntype: Note\n---\n{links} {uuid.uuid4().hex[:6]}"
        self.run(("UPDATE note SET content = :c WHERE id = :n", {"c": content, "n": note}),
                 *self.links_of(note, targets))
        return [self.event("note.updated", note, before)]

    def rename(self, note: int) -> list[dict[str, Any]]:
        """A title rename: Doughnut rewrites the link text in every referrer's content."""
        referrers = sorted({r[0] for r in self.rows(
            "SELECT note_id FROM note_wiki_title_cache WHERE target_note_id = :n", n=note)})
        befores = {r: self.place(r) for r in referrers}
        stamp = uuid.uuid4().hex[:6]
        self.run(("UPDATE note SET title = :t WHERE id = :n", {"t": f"Renamed {stamp}", "n": note}),
                 *(("UPDATE note SET content = CONCAT(COALESCE(content, ''), :s) WHERE id = :r",
                    {"s": f" [[Renamed {stamp}]]", "r": r}) for r in referrers))
        return [self.event("note.updated", note, self.place(note)),
                *(self.event("note.updated", r, befores[r]) for r in referrers)]

    def move(self, note: int) -> list[dict[str, Any]]:
        """To another folder of its notebook, or to the notebook's root."""
        before = self.place(note)
        folders = [r[0] for r in self.rows("SELECT id FROM folder WHERE notebook_id = :b",
                                           b=before["notebookId"])]
        folder = self.rng.choice([None, *folders])
        self.run(("UPDATE note SET folder_id = :f WHERE id = :n", {"f": folder, "n": note}))
        return [self.event("note.moved", note, before)]

    def delete_or_undo(self, note: int) -> list[dict[str, Any]]:
        before = self.place(note)
        deleted = self.rows("SELECT deleted_at IS NOT NULL FROM note WHERE id = :n", n=note)[0][0]
        moment = None if deleted else dt.datetime(2026, 11, 1)
        self.run(("UPDATE note SET deleted_at = :d WHERE id = :n", {"d": moment, "n": note}))
        return [self.event("note.restored" if deleted else "note.deleted", note, before)]

    def rename_folder(self, _note: int) -> list[dict[str, Any]]:
        folder = self.rng.choice([r[0] for r in self.rows("SELECT id FROM folder")])
        self.run(("UPDATE folder SET name = CONCAT(name, '+') WHERE id = :f", {"f": folder}))
        return [{"type": "folder.renamed", "folderId": folder, "occurredAt": now_iso()}]

    def move_folder(self, _note: int) -> list[dict[str, Any]]:
        """Under another folder of its notebook that is not inside it, or to the notebook's root."""
        folders = {r[0]: (r[1], r[2]) for r in self.rows(
            "SELECT id, notebook_id, parent_folder_id FROM folder")}
        folder = self.rng.choice(sorted(folders))
        inside = {folder}
        while grown := {f for f, (_, parent) in folders.items() if parent in inside} - inside:
            inside |= grown
        book = folders[folder][0]
        options = [f for f, (b, _) in folders.items() if b == book and f not in inside]
        parent = self.rng.choice([None, *options])
        self.run(("UPDATE folder SET parent_folder_id = :p WHERE id = :f", {"p": parent, "f": folder}))
        return [{"type": "folder.moved", "folderId": folder, "occurredAt": now_iso(),
                 "before": {"parentFolderId": folders[folder][1]}, "after": {"parentFolderId": parent}}]

    def rename_notebook(self, _note: int) -> list[dict[str, Any]]:
        book = self.rng.choice([r[0] for r in self.rows("SELECT id FROM notebook")])
        self.run(("UPDATE notebook SET name = CONCAT(name, '+') WHERE id = :b", {"b": book}))
        return [{"type": "notebook.renamed", "notebookId": book, "occurredAt": now_iso()}]

    def create(self, _note: int) -> list[dict[str, Any]]:
        """A new note in a folder whose capped peer list is not full yet (few notes), linking out."""
        book, folder = self.rng.choice(self.rows(
            "SELECT f.notebook_id, f.id FROM folder f LEFT JOIN note n ON n.folder_id = f.id "
            "GROUP BY f.id, f.notebook_id HAVING COUNT(n.id) < 3") or self.rows(
            "SELECT notebook_id, NULL FROM note WHERE notebook_id IS NOT NULL LIMIT 1"))
        note, targets = self.next_id("note"), self.rng.sample(self.notes(), 2)
        row = {"n": note, "b": book, "f": folder, "t": f"New {note}", "c": "fresh",
               "at": dt.datetime(2026, 11, 2)}
        self.run(("INSERT INTO note (id, notebook_id, folder_id, title, content, created_at) "
                  "VALUES (:n, :b, :f, :t, :c, :at)", row), *self.links_of(note, targets))
        return [self.event("note.created", note, None)]

    KINDS: tuple[str, ...] = ("relink", "rename", "move", "delete_or_undo", "rename_folder",
                              "move_folder", "rename_notebook", "create")

    def edit(self, kind: str | None = None) -> list[dict[str, Any]]:
        kind = kind or self.rng.choice(self.KINDS)
        edit: Callable[[int], list[dict[str, Any]]] = getattr(self, kind)
        return edit(self.rng.choice(self.notes()))
