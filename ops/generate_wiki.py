"""Deterministic Doughnut-2026-shaped databases (folders, wiki links) and a fast bulk loader.

``generate(notes, seed)`` yields ``(table, row)`` pairs for every table of
:mod:`storage.profiles.tables_2026`, parents before children, so rows can be inserted in that order.
The shape imitates today's Doughnut:

- users owning about two notebooks each, a few circles owning notebooks, subscriptions, and about
  5% of the notebooks in the bazaar; about 2,000 notes per notebook, in id blocks, plus 5% late
  additions to older notebooks;
- nested folders whose sizes follow a power law (preferential attachment), plus three "monster"
  folders of 5,000+ notes at 100k notes (5% of the notes each below);
- notes are leaves: ``folder_id`` NULL for about 10% (notebook root); titles unique per notebook
  (a suffix such as ``" (2)"`` when taken), except a few common titles ("Overview"...) repeated
  across folders, which other notes then link by folder path;
- about 20% relationship notes (the app's frontmatter: ``relation``, ``source``, ``target``);
- power-law outgoing links (most notes 0-5, some 50+), about 5% into other notebooks the saver may
  read (``[[Notebook: Title]]``), a few dead ones (unwritten titles, unreadable notebooks), and three
  or four hubs with 1,000+ referrers at 100k (bazaar notebooks, so anyone may link them);
- about 2% soft-deleted notes (rows kept); ``created_at`` strictly rising with the id over the five
  years before 2026-06-30; content mixing ASCII, CJK, RTL and emoji, sometimes NULL or empty.

``note_wiki_title_cache`` is consistent with the content by construction: targets are chosen first
(always earlier notes, so they exist when the linking note is saved at its ``created_at``), then
written as tokens that resolve to exactly them under Doughnut's rules; a row is kept only if the
target was not yet deleted at that save, and tokens are deduplicated by NFKC + lower case as Doughnut
does. The tests replay every note through :class:`storage.profiles.wiki_links_2026.LinkWorld`.

``load(engine, notes, seed)`` creates the tables and bulk-inserts in chunks of ``CHUNK`` rows
(executemany, one commit each); ``main()`` is the CLI:
``python -m ops.generate_wiki --db URL --notes 100000 --seed 0``.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import itertools
import json
import random
import sys
import time
from array import array
from collections.abc import Iterator, Sequence
from typing import Any

from tqdm import tqdm

from graphrag import GraphRagError, InvalidParameter
from ops.wiki_plan import (
    CJK,
    COMMON_TITLES,
    EPOCH,
    FILLED,
    NULL,
    RELATION,
    START,
    START_MS,
    Plan,
    pick_word,
    prose_pool,
)
from storage.database import Database, open_engine, reason
from storage.profiles.admin_2026 import insert_rows
from storage.profiles.tables_2026 import DatabaseNotEmpty, create_tables, nonempty_tables
from storage.profiles.wiki_links_2026 import dedupe_key

__all__ = ["CHUNK", "generate", "load", "main"]

CHUNK = 5_000


def _stamp(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)


class _Writer:
    """Phase 2, in id order: contents naming the chosen targets, and the rows they resolve to."""

    def __init__(self, plan: Plan, rng: random.Random) -> None:
        self.p, self.rng = plan, rng
        self.pool = prose_pool(rng)
        books = range(1, plan.books + 1)
        readable = {b: plan.readable(plan.saver(b)) for b in books}
        self.others = {b: sorted(readable[b] - {b}) for b in books}
        self.unreadable = {b: sorted(set(books) - readable[b]) for b in books}
        self._trails: dict[int, tuple[str, ...]] = {0: ()}
        self.row_id = 0

    # -- people, notebooks, folders -----------------------------------------------------------
    def people(self) -> Iterator[tuple[str, dict[str, Any]]]:
        p = self.p
        for u in range(1, p.users + 1):
            yield "user", {"id": u, "name": f"User {u} {CJK[u % len(CJK)]}",
                           "external_identifier": f"u{u}"}
        for c in range(1, p.circles + 1):
            yield "circle", {"id": c, "name": f"Study circle {c} 🎓"}
        members = [(c + 1, u) for c, us in enumerate(p.members) for u in us]
        for k, (c, u) in enumerate(members, 1):
            yield "circle_user", {"id": k, "circle_id": c, "user_id": u}
        for o in range(1, p.users + p.circles + 1):
            yield "ownership", {"id": o, "user_id": o if o <= p.users else None,
                                "circle_id": o - p.users if o > p.users else None}
        for b in range(1, p.books + 1):
            made = START - dt.timedelta(days=1) + dt.timedelta(minutes=b)
            owner = p.owner[b] if p.owner[b] > 0 else p.users - p.owner[b]
            yield "notebook", {"id": b, "ownership_id": owner, "creator_id": p.saver(b),
                               "name": p.names[b], "created_at": made, "updated_at": made,
                               "deleted_at": None}
        for k, (u, b) in enumerate(p.subscriptions, 1):
            yield "subscription", {"id": k, "user_id": u, "notebook_id": b}
        for k, b in enumerate(sorted(p.bazaar), 1):
            yield "bazaar_notebook", {"id": k, "notebook_id": b}

    def folders(self) -> Iterator[tuple[str, dict[str, Any]]]:
        for f, (book, parent, name, made_s) in enumerate(self.p.folders, 1):
            made = START + dt.timedelta(seconds=made_s)
            yield "folder", {"id": f, "notebook_id": book, "parent_folder_id": parent, "name": name,
                             "created_at": made, "updated_at": made}

    # -- notes --------------------------------------------------------------------------------
    def note(self, i: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        p = self.p
        tokens = self._links(i) if p.fill[i] == FILLED else []
        created = START + dt.timedelta(seconds=p.created_s[i])
        deleted = _stamp(p.deleted_ms[i]) if p.deleted_ms[i] else None
        row = {"id": i, "notebook_id": p.notebook[i], "folder_id": p.folder[i] or None,
               "title": p.titles[i], "content": self._content(i, tokens), "created_at": created,
               "updated_at": (deleted or created).replace(microsecond=0), "deleted_at": deleted}
        return row, self._rows(i, tokens)

    def _rows(self, i: int, tokens: list[tuple[str, int | None]]) -> list[dict[str, Any]]:
        saved_ms, rows, seen = START_MS + self.p.created_s[i] * 1000, [], set()
        for text, target in tokens:
            key = dedupe_key(text)
            if key in seen:
                continue
            seen.add(key)
            gone = self.p.deleted_ms[target] if target else 0
            if target and not (gone and gone <= saved_ms):
                self.row_id += 1
                rows.append({"id": self.row_id, "note_id": i, "target_note_id": target,
                             "link_text": text})
        return rows

    def _links(self, i: int) -> list[tuple[str, int | None]]:
        p, rng, book = self.p, self.rng, self.p.notebook[i]
        if p.kind[i] == RELATION:
            source, target, _ = p.endpoints[i]
            return [(self._token(source, book), source), (self._token(target, book), target)]
        count = 0 if rng.random() < 0.35 else min(int(rng.paretovariate(1.3)), 150)
        chosen: dict[int, None] = {}
        out: list[tuple[str, int | None]] = []
        for _ in range(count):
            link = self._one_link(i, book)
            if link is not None and (link[1] is None or link[1] not in chosen):
                chosen.update({link[1]: None} if link[1] else {})
                out.append(link)
        for hub in p.hub_of.get(i, ()):
            out.insert(rng.randrange(len(out) + 1), (self._token(hub, book), hub))
        return out

    def _one_link(self, i: int, book: int) -> tuple[str, int | None] | None:
        rng, r = self.rng, self.rng.random()
        if r < 0.05 and self.others[book]:
            other = rng.choice(self.others[book])
            target = self._earlier(other, i, 0.3)
            return None if target is None else (self._token(target, book), target)
        if r < 0.055 and self.unreadable[book]:
            other = rng.choice(self.unreadable[book])
            target = self._earlier(other, i, 0.3)
            return None if target is None else (self._token(target, book), None)
        if r < 0.075:
            return f"{pick_word(rng)} {pick_word(rng)} (unwritten)", None
        target = self._earlier(book, i, 0.6)
        return None if target is None else (self._token(target, book), target)

    def _earlier(self, book: int, i: int, recent: float) -> int | None:
        """A note of ``book`` created before note ``i``: often a recent one."""
        ids, rng = self.p.book_notes[book], self.rng
        before = bisect.bisect_left(ids, i)
        if before == 0:
            return None
        if rng.random() < recent:
            return ids[before - 1 - rng.randrange(min(before, 300))]
        return ids[rng.randrange(before)]

    def _trail(self, folder: int) -> tuple[str, ...]:
        if folder not in self._trails:
            _, parent, name, _ = self.p.folders[folder - 1]
            self._trails[folder] = (*self._trail(parent or 0), name)
        return self._trails[folder]

    def _token(self, target: int, book: int) -> str:
        """Link text resolving to ``target`` from a note of ``book`` (its saver may read it)."""
        p, rng = self.p, self.rng
        title = p.titles[target]
        if title in COMMON_TITLES:  # repeated across folders: named by its folder path
            title = "/".join(("", *self._trail(p.folder[target]), title))
        name = title
        if p.notebook[target] != book or rng.random() < 0.03:
            name = f"{p.names[p.notebook[target]]}: {name.lstrip('/') if p.folder[target] else name}"
        elif rng.random() < 0.03:
            name = name.lower()
        return f"{name}|{pick_word(rng)}" if rng.random() < 0.05 else name

    def _content(self, i: int, tokens: list[tuple[str, int | None]]) -> str | None:
        p, rng = self.p, self.rng
        if p.fill[i] != FILLED:
            return None if p.fill[i] == NULL else ""
        if p.kind[i] == RELATION:
            kebab = "-".join(p.endpoints[i][2].split())
            body = f"\n\n{self._prose()}" if rng.random() < 0.2 else ""
            return (f'---\ntype: Relationship\nrelation: {kebab}\nsource: "[[{tokens[0][0]}]]"\n'
                    f'target: "[[{tokens[1][0]}]]"\n---\n\n{body}')
        links = [f"[[{text}]]" for text, _ in tokens]
        front = f'see also: "{links.pop(0)}"\n' if links and rng.random() < 0.03 else ""
        tail = ("\n\n## Links\n" + "\n".join(f"- {x}" for x in links) if len(links) > 6
                else "\n\nSee " + ", ".join(links) + "." if links else "")
        if tail and rng.random() < 0.02:
            tail = f"\n\n```\n{tail.strip()}\n```"
        body = self._prose() + tail
        return body if rng.random() < 0.01 and not front else f"---\ntype: Note\n{front}---\n{body}"

    def _prose(self) -> str:
        rng, r = self.rng, self.rng.random()
        length = (rng.randint(1, 60) if r < 0.25 else rng.randint(60, 300) if r < 0.75
                  else rng.randint(300, 1500) if r < 0.95 else rng.randint(2000, 6000))
        start = rng.randrange(len(self.pool) - length)
        return self.pool[start : start + length]


def generate(notes: int, seed: int = 0) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(table, row)`` pairs of a ``notes``-note database, parents first; deterministic per seed.

    Order: people, notebooks, sharing, folders, then per ``CHUNK`` notes their ``note`` rows followed
    by their ``note_wiki_title_cache`` rows (whose targets always come earlier)."""
    if notes < 1:
        raise InvalidParameter("notes", "must be at least 1")
    rng = random.Random(seed)
    writer = _Writer(Plan(notes, rng).build(), rng)
    yield from writer.people()
    yield from writer.folders()
    for start in range(1, notes + 1, CHUNK):
        links: list[dict[str, Any]] = []
        for i in range(start, min(notes, start + CHUNK - 1) + 1):
            row, rows = writer.note(i)
            yield "note", row
            links += rows
        yield from (("note_wiki_title_cache", r) for r in links)


class _Tally:
    """Counts over the loaded rows; referrers and folder sizes count live notes only."""

    def __init__(self, n: int) -> None:
        self.counts: dict[str, int] = {}
        self.deleted = bytearray(n + 1)
        self.referrers = array("i", [0]) * (n + 1)
        self.in_folder: dict[int, int] = {}
        self.relationships = self._last = 0
        self._targets: set[int] = set()

    def add(self, table: str, rows: list[dict[str, Any]]) -> None:
        self.counts[table] = self.counts.get(table, 0) + len(rows)
        for row in rows:
            if table == "note":
                self._note(row)
            elif table == "note_wiki_title_cache":
                self._link(row)

    def _note(self, row: dict[str, Any]) -> None:
        self.relationships += (row["content"] or "").startswith("---\ntype: Relationship")
        if row["deleted_at"] is not None:
            self.deleted[row["id"]] = 1
        elif row["folder_id"] is not None:
            self.in_folder[row["folder_id"]] = self.in_folder.get(row["folder_id"], 0) + 1

    def _link(self, row: dict[str, Any]) -> None:
        if row["note_id"] != self._last:
            self._last, self._targets = row["note_id"], set()
        target = row["target_note_id"]
        if target not in self._targets and not (self.deleted[target] or self.deleted[row["note_id"]]):
            self._targets.add(target)
            self.referrers[target] += 1

    def summary(self, seconds: float) -> dict[str, Any]:
        counts = self.counts
        return {"notes": counts.get("note", 0), "links": counts.get("note_wiki_title_cache", 0),
                "folders": counts.get("folder", 0), "notebooks": counts.get("notebook", 0),
                "relationships": self.relationships, "deleted": sum(self.deleted),
                "max_referrers": max(self.referrers),
                "max_folder": max(self.in_folder.values(), default=0), "seconds": round(seconds, 2)}


def _batches(pairs: Iterator[tuple[str, dict[str, Any]]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Consecutive rows of one table, at most ``CHUNK`` at a time."""
    for table, group in itertools.groupby(pairs, key=lambda pair: pair[0]):
        rows = (row for _, row in group)
        while batch := list(itertools.islice(rows, CHUNK)):
            yield table, batch


def load(engine: Database, notes: int, seed: int = 0, *, progress: bool = True) -> dict[str, Any]:
    """Create the 2026 tables if missing and fill them (they must be empty) with ``generate``.

    Returns counts: notes, links, folders, notebooks, relationships, deleted, max_referrers,
    max_folder (live notes in the fullest folder) and seconds."""
    if notes < 1:
        raise InvalidParameter("notes", "must be at least 1")
    create_tables(engine)
    filled = nonempty_tables(engine)
    if filled:
        raise DatabaseNotEmpty(f"tables {', '.join(filled)} are not empty; load into an empty database")
    tally, started = _Tally(notes), time.perf_counter()
    show = progress and sys.stderr.isatty()
    with tqdm(total=notes, unit="note", unit_scale=True, disable=not show) as bar:
        for table, batch in _batches(generate(notes, seed)):
            insert_rows(engine, {table: batch}, chunk=CHUNK, bulk=True)
            tally.add(table, batch)
            bar.update(len(batch) if table == "note" else 0)
    return tally.summary(time.perf_counter() - started)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: load and print the counts as one JSON line; one-line error and exit 1 on failure."""
    parser = argparse.ArgumentParser(
        prog="python -m ops.generate_wiki",
        description="Fill empty Doughnut 2026 tables (folders, wiki links) with a generated graph.")
    parser.add_argument("--db", required=True, help="SQLAlchemy URL, e.g. mysql+pymysql://root@host/db")
    parser.add_argument("--notes", type=int, default=100_000, help="number of notes (default 100000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        counts = load(open_engine(args.db), args.notes, args.seed, progress=not args.no_progress)
    except GraphRagError as err:
        print(f"error: {reason(err)}", file=sys.stderr)
        return 1
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
