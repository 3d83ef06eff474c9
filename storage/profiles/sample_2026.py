"""A bundled, realistic sample of today's Doughnut (folders and wiki links) for demos and tests.

The data lives in ``storage/data/sample_2026.json``: users, a circle, notebooks (owner, bazaar,
subscriptions, one deleted later) and notes **in creation order**, each with its notebook key, folder
path, title and either ``body`` (saved under ``---\\ntype: Note\\n---\\n``, as the app saves content),
``content`` (verbatim, may be null or empty) or ``relation``/``source``/``target`` (a relationship
note, in the app's layout). Three entries are expanded here instead of stored: a 320-word vocabulary
folder, 120 daily journal notes that all link the hub, and a lecture transcript over 100 KiB.

Contract:

* ``sample_2026_rows()`` returns the same rows on every call: no ``random``, no clock; anything that
  looks random comes from ``hashlib.blake2b`` over a string. Ids start at 1 in list order per table.
* Time: each note is created after the previous one (whole seconds, strictly increasing with the id);
  ``deleted_days`` / ``edited_days`` put ``deleted_at`` (milliseconds) or a later save (``updated_at``)
  that many days after creation. Folders and notebooks are created just before their first note.
* ``note_wiki_title_cache`` is **not stored**: it is derived on load from the contents with
  :class:`storage.profiles.wiki_links_2026.LinkWorld`, i.e. resolved as Doughnut resolves on save, as
  of each note's save time. So a link to a note created later, or deleted earlier, is dead (no row),
  and a row to a note deleted afterwards is kept. The rows are consistent with the text by construction,
  and the tests check them against the database independently.
* Titles are unique per (notebook, folder, lower(title)) and folder names per (notebook, parent), as
  Doughnut's keys require, deleted notes included. No content declares ``aliases:``.

``SAMPLE_2026_FOCUS_IDS`` names interesting notes, computed from the rows.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import unicodedata
from collections import Counter
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from storage.profiles.tables_2026 import DatabaseNotEmpty, create_tables, metadata, nonempty_tables
from storage.profiles.wiki_links_2026 import LinkWorld

__all__ = ["SAMPLE_2026_FOCUS_IDS", "SAMPLE_2026_PATH", "load_sample_2026", "sample_2026_rows"]

SAMPLE_2026_PATH = Path(__file__).parent.parent / "data" / "sample_2026.json"
Rows = dict[str, list[dict[str, Any]]]
_NOTE_FENCE = "---\ntype: Note\n---\n"
_DAY_S = 86_400


def _digest(*parts: object) -> int:
    text = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def _relationship(entry: dict[str, Any]) -> str:
    """The app's relationship layout: kebab-case relation, quoted endpoint links, then the body."""
    def quoted(link: str) -> str:
        return '"' + link.replace("\\", "\\\\").replace('"', '\\"') + '"'
    relation = "-".join(entry["relation"].lower().split())
    head = (f"---\ntype: Relationship\nrelation: {relation}\nsource: {quoted(entry['source'])}\n"
            f"target: {quoted(entry['target'])}\n---\n\n")
    return head + (f"\n\n{entry['body']}" if entry.get("body") else "")


def _content(entry: dict[str, Any]) -> str | None:
    if "relation" in entry:
        return _relationship(entry)
    if "body" in entry:
        return _NOTE_FENCE + str(entry["body"])
    return None if entry["content"] is None else str(entry["content"])


# -- expanded entries ---------------------------------------------------------------------------
_FIRST = "学会電国自大新社生手時行入出話食"
_SECOND = "生者語場物業力品国車人会期長室店地館所員"


def _vocabulary(spec: dict[str, Any], after: dt.datetime) -> Iterator[dict[str, Any]]:
    """A bulk import: one note per two-kanji word, a minute apart; some link ``spec['link']``."""
    words = [a + b for a in _FIRST for b in _SECOND][: spec["count"]]
    moment = after
    for i, word in enumerate(words):
        moment += dt.timedelta(seconds=40 + _digest("vocab", word) % 40)
        link = f" 関連：{spec['link']}" if i % spec["link_every"] == 0 else ""
        emoji = " 🎌" if i % 40 == 39 else ""
        body = f"**{word}**\n\n例文：「{word}」という言葉を使って文を作る。{link}{emoji}"
        yield {"nb": spec["nb"], "folder": spec["folder"], "title": word, "body": body, "at": moment,
               "deleted_days": 2 if i in spec.get("deleted", ()) else None}


def _journal_body(i: int, day: dt.date) -> str:
    hub = ("[[Learning Journal: Spaced Repetition]]" if i % 17 == 0
           else "[[spaced repetition|SR]]" if i % 5 == 0 else "[[Spaced Repetition]]")
    parts = [f"Reviewed {20 + _digest('cards', day) % 40} cards with {hub}."]
    parts += [" Sorting drill: [[Computer Science: Quicksort]]."] if i % 7 == 0 else []
    parts += [" 文法：[[Japanese: は vs が]]。"] if i % 11 == 0 else []
    parts += [" 🍩🧠✨"] if i % 13 == 0 else []
    parts += [" Glaze again: [[Ben's Kitchen: 🍩 Doughnut Glaze]]."] if i % 29 == 0 else []
    return "".join(parts)


def _journal(spec: dict[str, Any], after: dt.datetime) -> Iterator[dict[str, Any]]:
    """One review note per evening in ``Daily/<year>/<year-month>``, each linking the hub."""
    for i in range(1, spec["count"] + 1):
        day = after.date() + dt.timedelta(days=i)
        moment = dt.datetime.combine(day, dt.time(21)) + dt.timedelta(seconds=_digest(day) % 5400)
        yield {"nb": spec["nb"], "folder": f"Daily/{day.year}/{day:%Y-%m}", "title": f"{day} Review",
               "body": _journal_body(i, day), "at": moment}


_LECTURE = (
    "Today we compare algorithms by how their running time grows with the input. We count steps, "
    "not seconds, because machines differ but growth rates do not. A loop over n items costs n steps; "
    "a loop inside a loop costs n squared. Halving the input at each step, as binary search does, "
    "costs log n. Keep an eye on the constant factors anyway: for small inputs they dominate. "
)


def _transcript(spec: dict[str, Any], after: dt.datetime) -> Iterator[dict[str, Any]]:
    """One lecture transcript of at least ``spec['bytes']`` UTF-8 bytes, links at both ends."""
    parts = [f"# {spec['title']}\n\nWe start from [[Big-O Notation]].\n"]
    size, k = len(parts[0].encode()), 0
    while size < spec["bytes"]:
        k += 1
        part = f"\n## Part {k}\n\n{_LECTURE * (1 + k % 3)}\n"
        parts.append(part)
        size += len(part.encode())
    parts.append("\nHomework: implement [[Quicksort]] and [[Mergesort]]. 🎓\n")
    yield {"nb": spec["nb"], "title": spec["title"], "body": "".join(parts),
           "at": after + dt.timedelta(days=1)}


_EXPANSIONS = {"vocabulary": _vocabulary, "journal": _journal, "transcript": _transcript}


# -- building -----------------------------------------------------------------------------------
class _Builder:
    """Rows per table, filled in creation order; the JSON's keys map to ids here."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.rows: Rows = {t.name: [] for t in metadata.sorted_tables}
        self.moment = dt.datetime.fromisoformat(data["start"])
        self.users: dict[str, int] = {}
        self.owners: dict[str, int] = {}
        self.notebooks: dict[str, int] = {}
        self.folders: dict[tuple[int, str], int] = {}
        self._people(data)
        self._notebooks(data)

    def add(self, table: str, **row: Any) -> int:
        rows = self.rows[table]
        rows.append({"id": len(rows) + 1, **row})
        return len(rows)

    def _people(self, data: dict[str, Any]) -> None:
        for u in data["users"]:
            self.users[u["key"]] = self.add("user", name=u["name"],
                                            external_identifier=u["external_identifier"])
            self.owners[u["key"]] = self.add("ownership", user_id=self.users[u["key"]], circle_id=None)
        for c in data["circles"]:
            circle = self.add("circle", name=c["name"])
            self.owners[f"circle:{c['key']}"] = self.add("ownership", user_id=None, circle_id=circle)
            for member in c["members"]:
                self.add("circle_user", circle_id=circle, user_id=self.users[member])

    def _notebooks(self, data: dict[str, Any]) -> None:
        circles = {f"circle:{c['key']}": c["members"] for c in data["circles"]}
        for nb in data["notebooks"]:
            members = circles.get(nb["owner"], [nb["owner"]])
            creator = min(self.users[m] for m in members)  # a circle's notebook: its first member
            self.notebooks[nb["key"]] = self.add(
                "notebook", ownership_id=self.owners[nb["owner"]], creator_id=creator, name=nb["name"],
                description=nb.get("description"), created_at=None, updated_at=None, deleted_at=None)
        for user, nb in data["subscriptions"]:
            self.add("subscription", user_id=self.users[user], notebook_id=self.notebooks[nb])
        for nb in data["bazaar"]:
            self.add("bazaar_notebook", notebook_id=self.notebooks[nb])

    def folder(self, notebook_id: int, path: str | None, moment: dt.datetime) -> int | None:
        """The folder at ``path`` (``A/B/C``) in the notebook, created with its parents if new."""
        parent: int | None = None
        names = path.split("/") if path else []
        for depth, name in enumerate(names, 1):
            key = (notebook_id, "/".join(names[:depth]))
            if key not in self.folders:
                made = moment - dt.timedelta(minutes=5)
                self.folders[key] = self.add("folder", notebook_id=notebook_id, parent_folder_id=parent,
                                             name=name, created_at=made, updated_at=made)
            parent = self.folders[key]
        return parent

    def entries(self, notes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The notes in order, expansions inlined, each with its creation moment ``at``."""
        for entry in notes:
            if "generate" in entry:
                for made in _EXPANSIONS[entry["generate"]](entry, self.moment):
                    self.moment = made["at"]
                    yield made
                continue
            gap_s = int(entry.get("after_days", 1) * _DAY_S) + _digest("gap", entry["title"]) % 10_800
            self.moment += dt.timedelta(seconds=gap_s)
            yield {**entry, "at": self.moment}

    def note(self, entry: dict[str, Any]) -> None:
        created: dt.datetime = entry["at"]
        notebook = self.notebooks[entry["nb"]] if entry["nb"] is not None else None
        folder = self.folder(notebook, entry.get("folder"), created) if notebook is not None else None
        deleted = updated = None
        if entry.get("deleted_days") is not None:
            ms = _digest("deleted", entry["title"]) % 86_400_000
            deleted = created + dt.timedelta(days=entry["deleted_days"], milliseconds=ms)
        if entry.get("edited_days") is not None:
            updated = created + dt.timedelta(days=entry["edited_days"])
        self.add("note", notebook_id=notebook, folder_id=folder, title=entry["title"],
                 content=_content(entry), created_at=created,
                 updated_at=(deleted or updated or created).replace(microsecond=0),
                 deleted_at=deleted)

    def finish(self, data: dict[str, Any]) -> Rows:
        """Date the notebooks by their first note, then derive the link cache from the contents."""
        first: dict[int, dt.datetime] = {}
        for note in self.rows["note"]:
            if note["notebook_id"] is not None:
                first.setdefault(note["notebook_id"], note["created_at"])
        start = dt.datetime.fromisoformat(data["start"])
        for row, spec in zip(self.rows["notebook"], data["notebooks"], strict=True):
            row["created_at"] = row["updated_at"] = first.get(row["id"], start) - dt.timedelta(hours=1)
            if spec.get("deleted_days") is not None:
                row["deleted_at"] = row["created_at"] + dt.timedelta(days=spec["deleted_days"])
        self.rows["note_wiki_title_cache"] = list(LinkWorld(self.rows).cache_rows())
        return self.rows


@cache
def _build() -> Rows:
    data = json.loads(SAMPLE_2026_PATH.read_text(encoding="utf-8"))
    builder = _Builder(data)
    for entry in builder.entries(data["notes"]):
        builder.note(entry)
    return builder.finish(data)


def sample_2026_rows() -> Rows:
    """Every table's rows (a fresh copy), keyed by table name, each list ordered by id."""
    return copy.deepcopy(_build())


def load_sample_2026(engine: Engine, *, chunk: int = 500) -> dict[str, int]:
    """Create the 2026 tables if missing and insert the sample; returns the row count per table.

    Refuses (:class:`DatabaseNotEmpty`) when any of the tables already holds rows. Tables go in
    foreign-key order, in one transaction.
    """
    create_tables(engine)
    filled = nonempty_tables(engine)
    if filled:
        raise DatabaseNotEmpty(f"tables {', '.join(filled)} are not empty; load into an empty database")
    rows = _build()
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            batch = rows[table.name]
            for start in range(0, len(batch), chunk):
                conn.execute(table.insert(), batch[start : start + chunk])
    return {name: len(batch) for name, batch in rows.items()}


# -- interesting notes --------------------------------------------------------------------------
def _cjk(text: str | None) -> int:
    scripts = ("CJK", "HIRAGANA", "KATAKANA")
    return sum(1 for ch in text or "" if unicodedata.name(ch, "").startswith(scripts))


def _focus_ids(rows: Rows) -> dict[str, int]:
    notes = {n["id"]: n for n in rows["note"]}
    live = {i: n for i, n in notes.items() if n["deleted_at"] is None}
    links = [r for r in rows["note_wiki_title_cache"] if r["note_id"] in live]
    pairs = {(r["target_note_id"], r["note_id"]) for r in links if r["target_note_id"] in live}
    referrers = Counter(target for target, _ in pairs)
    crossing = Counter(r["note_id"] for r in links
                       if notes[r["target_note_id"]]["notebook_id"] != live[r["note_id"]]["notebook_id"])
    in_folder = Counter(n["folder_id"] for n in live.values() if n["folder_id"] is not None)
    depth: dict[int | None, int] = {None: 0}
    for f in rows["folder"]:  # a parent folder always comes before its children
        depth[f["id"]] = depth[f["parent_folder_id"]] + 1
    owner = {nb["id"]: rows["ownership"][nb["ownership_id"] - 1]["user_id"] for nb in rows["notebook"]}
    subscribed = {(s["user_id"], s["notebook_id"]) for s in rows["subscription"]}
    seen_by_subscriber = [r["target_note_id"] for r in links if r["target_note_id"] in live
                          and (owner.get(live[r["note_id"]]["notebook_id"]),
                               notes[r["target_note_id"]]["notebook_id"]) in subscribed]
    big_folder = _top(in_folder)
    return {
        "hub": _top(referrers),
        "big_folder_note": min(i for i, n in live.items() if n["folder_id"] == big_folder),
        "cross_notebook_linker": _top(crossing),
        "deleted_target_linker": min(r["note_id"] for r in links
                                     if notes[r["target_note_id"]]["deleted_at"] is not None),
        "deep_folder_note": min(live, key=lambda i: (-depth[live[i]["folder_id"]], i)),
        "cjk_note": min(live, key=lambda i: (-_cjk(live[i]["content"]), i)),
        "subscriber_visible_note": _top(Counter(seen_by_subscriber)),
    }


def _top(counts: Counter[Any]) -> Any:
    """The most frequent key; the smallest one among ties."""
    return min(counts, key=lambda k: (-counts[k], k))


SAMPLE_2026_FOCUS_IDS: dict[str, int] = _focus_ids(_build())
"""Note ids worth pointing a demo or a test at, computed from the sample's rows.

* ``hub``: the live note with the most live referrers (cache rows from distinct live notes).
* ``big_folder_note``: the lowest live id in the folder with the most live notes (300+).
* ``cross_notebook_linker``: the live note with the most rows into other notebooks.
* ``deleted_target_linker``: the lowest live note with a row whose target is soft-deleted.
* ``deep_folder_note``: a live note in the deepest folder.
* ``cjk_note``: the live note whose content holds the most CJK characters.
* ``subscriber_visible_note``: a live note of a subscribed notebook that the subscriber's own notes
  link to (visible to the subscriber only through the subscription).
"""
