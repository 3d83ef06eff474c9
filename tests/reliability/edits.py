"""Doughnut's edits on the ``note`` table, from a seeded RNG, for the concurrency and crash suites.

:func:`generated_rows` is the starting graph; :class:`Doughnut` changes it the way the app does
(title and details updates, moves, soft deletes of a subtree with the link notes pointing into it,
restores, new link notes and children, relinks) and returns the events the app would post.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine

from tests.reliability.harness import now_iso

BASE_CREATED = dt.datetime(2025, 3, 1, 8, 0, 0)
TEXTS = (
    "plain ascii text ",
    "猫と犬の話。漢字かな交じり文 ",
    "🍩🐕‍🦺 emoji ",
    "שלום עולם مرحبا ",
    "e\u0301 combining ",
)


def details_text(rng: random.Random) -> str | None:
    """NULL, short, or long (cut at 150 bytes in related notes, often inside a multibyte char)."""
    kind = rng.random()
    if kind < 0.15:
        return None
    piece = rng.choice(TEXTS)
    if kind < 0.55:
        return piece.strip() + f" #{rng.randrange(10**6)}"
    return (piece * (1 + 400 // len(piece)))[: rng.randrange(120, 400)] + f" #{rng.randrange(10**6)}"


def generated_rows(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` notes under three roots (notebooks): a random tree, every 6th note a link note."""
    rows: list[dict[str, Any]] = []
    roots = (1, 2, 3)
    for note_id in range(1, count + 1):
        if note_id in roots:
            parent, target = None, None
        else:
            parent = rng.choice([r["id"] for r in rows[-40:] if r["target_note_id"] is None])
            target = rng.randrange(1, note_id) if note_id % 6 == 0 else None
        rows.append({
            "id": note_id, "parent_id": parent, "target_note_id": target,
            "sibling_order": note_id * 1000,
            "topic_constructor": f":link {note_id}" if target else f"Note {note_id}",
            "description": details_text(rng),
            "created_at": BASE_CREATED + dt.timedelta(hours=note_id, seconds=note_id % 7),
            "deleted_at": None,
        })
    return rows


@dataclass
class _Mirror:
    """What the editor knows of one note (it is the only writer of the table)."""

    parent: int | None
    target: int | None
    order: int
    deleted: dt.datetime | None = None


@dataclass(frozen=True)
class Edit:
    """One committed edit: when (wall clock), which kind, its event, and the notes its SQL changed."""

    at_s: float
    op: str
    event: dict[str, Any]
    changed: frozenset[int]

    def names(self, note_id: int) -> bool:
        """Whether the edit changed ``note_id`` or its event names it (subject, parent, target)."""
        refs = [self.event.get("noteId")]
        for side in ("before", "after"):
            refs += list((self.event.get(side) or {}).values())
        return note_id in self.changed or note_id in refs

    def line(self) -> str:
        moment = dt.datetime.fromtimestamp(self.at_s, dt.UTC).strftime("%H:%M:%S.%f")[:-3]
        sides = {k: self.event[k] for k in ("before", "after") if k in self.event}
        return (f"{moment} {self.op}: {self.event['type']} of {self.event['noteId']} {sides or ''}"
                f" (rows changed: {sorted(self.changed)})")


@dataclass
class _Deletion:
    root: int
    ids: frozenset[int]
    stamp: dt.datetime


OPS = (("title", 30), ("details", 18), ("move", 15), ("delete", 8), ("restore", 7),
       ("link", 12), ("child", 5), ("relink", 5))


class Doughnut:
    """Edits ``note`` as Doughnut does, each change committed before its event is returned.

    One thread only: it keeps a mirror of the structure to pick sensible edits (no cycles, restores
    of whole deletions whose parent is live) and never reads the table back.
    """

    def __init__(self, engine: Engine, rows: list[dict[str, Any]], rng: random.Random) -> None:
        self.engine, self.rng = engine, rng
        self.notes = {r["id"]: _Mirror(r["parent_id"], r["target_note_id"], r["sibling_order"])
                      for r in rows}
        self.deletions: list[_Deletion] = []
        self.next_id = max(self.notes) + 1
        self.revision = 0
        self.ops: Counter[str] = Counter()
        self.log: list[Edit] = []
        self._changed: set[int] = set()
        self._names, self._weights = zip(*OPS, strict=True)

    # -- picking ---------------------------------------------------------------------------------
    def live(self) -> list[int]:
        return [i for i, n in self.notes.items() if n.deleted is None]

    def _live_plain(self) -> list[int]:
        return [i for i, n in self.notes.items() if n.deleted is None and n.target is None]

    def _children(self) -> dict[int, list[int]]:
        kids: dict[int, list[int]] = defaultdict(list)
        for i, n in self.notes.items():
            if n.parent is not None:
                kids[n.parent].append(i)
        return kids

    def _subtree(self, root: int, kids: dict[int, list[int]]) -> set[int]:
        found, stack = {root}, [root]
        while stack:
            for child in kids.get(stack.pop(), ()):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def _is_live(self, note_id: int | None) -> bool:
        return note_id is not None and note_id in self.notes and self.notes[note_id].deleted is None

    # -- SQL ---------------------------------------------------------------------------------------
    def _sql(self, statement: str, *, changed: Iterable[int], **params: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(text(statement), params)
        self._changed.update(changed)

    def _event(self, kind: str, note_id: int, before: dict[str, int | None] | None = None,
               after: dict[str, int | None] | None = None) -> dict[str, Any]:
        event: dict[str, Any] = {"type": kind, "noteId": note_id, "occurredAt": now_iso()}
        if before is not None:
            event["before"] = before
        if after is not None:
            event["after"] = after
        return event

    # -- edits -------------------------------------------------------------------------------------
    def edit(self) -> dict[str, Any]:
        """One random edit, committed; returns its event."""
        while True:
            op = self.rng.choices(self._names, self._weights)[0]
            self._changed = set()
            event = getattr(self, f"_{op}")()
            if event is not None:
                self.ops[op] += 1
                self.log.append(Edit(time.time(), op, event, frozenset(self._changed)))
                return event

    def history(self, note_id: int) -> list[str]:
        """The edits that changed ``note_id`` or whose events name it, oldest first (what a check
        that finds its snapshot stale or missing prints)."""
        return [edit.line() for edit in self.log if edit.names(note_id)]

    def _title(self) -> dict[str, Any]:
        note_id = self.rng.choice(self.live())
        self.revision += 1
        tail = self.rng.choice(("", " 猫", " 🍩", " שלום"))
        base = ":link" if self.notes[note_id].target is not None else "Note"
        self._sql("UPDATE note SET topic_constructor = :t, updated_at = UTC_TIMESTAMP() WHERE id = :i",
                  t=f"{base} {note_id} r{self.revision}{tail}", i=note_id, changed=[note_id])
        return self._event("note.updated", note_id)

    def _details(self) -> dict[str, Any]:
        note_id = self.rng.choice(self.live())
        self._sql("UPDATE note SET description = :d, updated_at = UTC_TIMESTAMP() WHERE id = :i",
                  d=details_text(self.rng), i=note_id, changed=[note_id])
        return self._event("note.updated", note_id)

    def _move(self) -> dict[str, Any] | None:
        candidates = [i for i in self._live_plain() if self.notes[i].parent is not None]
        if not candidates:
            return None
        note_id = self.rng.choice(candidates)
        old = self.notes[note_id].parent
        below = self._subtree(note_id, self._children())
        parents = [p for p in self._live_plain() if p not in below and p != old]
        if not parents:
            return None
        new = self.rng.choice(parents)
        order = self.rng.randrange(0, 10**7)
        self._sql("UPDATE note SET parent_id = :p, sibling_order = :o, updated_at = UTC_TIMESTAMP() "
                  "WHERE id = :i", p=new, o=order, i=note_id, changed=[note_id])
        self.notes[note_id].parent, self.notes[note_id].order = new, order
        return self._event("note.moved", note_id, {"parentId": old}, {"parentId": new})

    def _delete(self) -> dict[str, Any] | None:
        candidates = [i for i in self.live() if self.notes[i].parent is not None]
        note_id = self.rng.choice(candidates)
        below = {i for i in self._subtree(note_id, self._children()) if self._is_live(i)}
        if len(below) > 40:
            return None
        pointing = {i for i, n in self.notes.items()
                    if n.deleted is None and n.target in below and i not in below}
        ids = below | pointing
        stamp = dt.datetime(2025, 6, 1) + dt.timedelta(milliseconds=len(self.deletions) + 1)
        self._sql(f"UPDATE note SET deleted_at = :t WHERE id IN ({_ids(ids)})", changed=ids, t=stamp)
        for i in ids:
            self.notes[i].deleted = stamp
        self.deletions.append(_Deletion(note_id, frozenset(ids), stamp))
        return self._event("note.deleted", note_id)

    def _restore(self) -> dict[str, Any] | None:
        ready = [d for d in self.deletions
                 if self.notes[d.root].parent is None or self._is_live(self.notes[d.root].parent)]
        if not ready:
            return None
        deletion = self.rng.choice(ready)
        self.deletions.remove(deletion)
        back: set[int] = set()
        pending = {i for i in deletion.ids if self.notes[i].deleted == deletion.stamp}
        changed = True
        while changed:  # parents first: never a live note under a deleted parent
            changed = False
            for i in sorted(pending - back):
                parent = self.notes[i].parent
                if i == deletion.root or parent in back or self._is_live(parent):
                    back.add(i)
                    changed = True
        self._sql(f"UPDATE note SET deleted_at = NULL WHERE id IN ({_ids(back)})", changed=back)
        for i in back:
            self.notes[i].deleted = None
        return self._event("note.restored", deletion.root)

    def _insert(self, parent: int, target: int | None, title: str) -> int:
        note_id = self.next_id
        self.next_id += 1
        order = max((n.order for n in self.notes.values() if n.parent == parent), default=0) + 1000
        created = dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)
        self._sql("INSERT INTO note (id, parent_id, target_note_id, sibling_order, topic_constructor, "
                  "description, created_at, updated_at) VALUES (:i, :p, :t, :o, :title, :d, :c, :c)",
                  changed=[note_id], i=note_id, p=parent, t=target, o=order, title=title,
                  d=details_text(self.rng), c=created)
        self.notes[note_id] = _Mirror(parent, target, order)
        return note_id

    def _link(self) -> dict[str, Any] | None:
        subject = self.rng.choice(self._live_plain())
        target = self.rng.choice(self.live())
        if target == subject:
            return None
        note_id = self._insert(subject, target, self.rng.choice((":relates to", ":a part of",
                                                                  ":an example of")))
        return self._event("note.created", note_id, None,
                           {"parentId": subject, "targetNoteId": target})

    def _child(self) -> dict[str, Any]:
        parent = self.rng.choice(self._live_plain())
        note_id = self._insert(parent, None, f"Note {self.next_id} new")
        return self._event("note.created", note_id, None, {"parentId": parent})

    def _relink(self) -> dict[str, Any] | None:
        links = [i for i in self.live() if self.notes[i].target is not None]
        if not links:
            return None
        note_id = self.rng.choice(links)
        old, new = self.notes[note_id].target, self.rng.choice(self.live())
        if new in (old, note_id):
            return None
        self._sql("UPDATE note SET target_note_id = :t, updated_at = UTC_TIMESTAMP() WHERE id = :i",
                  t=new, i=note_id, changed=[note_id])
        self.notes[note_id].target = new
        return self._event("note.updated", note_id, {"targetNoteId": old}, {"targetNoteId": new})


def _ids(ids: Iterable[int]) -> str:
    return ", ".join(str(int(i)) for i in sorted(ids))
