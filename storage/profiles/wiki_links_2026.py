"""Doughnut's save-time wiki-link resolution (2026), restated to derive ``note_wiki_title_cache`` rows.

Doughnut parses a note's ``content`` when it is saved and stores one row per resolved link token; the
service reads only those rows. Test data must therefore carry rows that Doughnut itself would have
written. :class:`LinkWorld` derives them from the tables' rows, following Doughnut's rules at commit
b2c0268c09 (``WikiLinkMarkdown``, ``NoteContentMarkdown``, ``WikiLinkTargetReference``,
``WikiLinkResolver``):

* **Tokens**: the values of the leading YAML block (scalars and list items, in key order) first, then
  the body; in each, ``[[inner]]`` (inner trimmed, empty ignored) and path links ``[text](/a/b.md)``
  (not images, not app URLs such as ``/n/12``) in document order. Code blocks are not special.
* **Dedupe** by NFKC + lower case, first spelling kept; the kept spelling is the row's ``link_text``.
* **Target** = the part before the first ``|`` (unless the display is blank); a path link's href.
  A colon strictly inside, with non-blank sides, makes it ``Notebook: Title``; otherwise the note's
  own notebook. A target with ``/`` (or starting with it) and no colon is a folder path plus a title
  (trailing ``.md`` ignored) that must match the folder trail from the root.
* **Match**: notebook name and title compared case-insensitively (``lower``; trailing spaces ignored,
  as MySQL's PAD SPACE ``utf8mb4_bin`` does), candidates by ascending id, the first whose notebook
  the *saver* may read (owner, circle member, subscriber, or the notebook is in the bazaar).
* **Time**: a note is resolved as of its last content save. A candidate (and its notebook) must
  exist and not be deleted at that moment, so links to notes created later, or deleted earlier, stay
  dead, and rows to notes deleted afterwards are kept, as in Doughnut.

Conventions this module adds (Doughnut records neither): the save time is ``updated_at`` for a live
note and ``created_at`` for a deleted one (deletion overwrites ``updated_at``); the saver is the
owning user, or the lowest-id member for a circle's notebook, or nobody for a note without a notebook
(which then reads only the bazaar). Memberships, subscriptions and the bazaar are taken as constant.
Not modelled: the alias fallback (``note_alias_index``; data for it must declare no ``aliases:``),
YAML beyond ``key: scalar``, ``key:`` + ``- item`` lists and quoted strings (a flow collection such as
an unquoted ``[[X]]`` yields no value, as in Doughnut where it parses as a nested list).
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LinkWorld",
    "PathTarget",
    "authored_tokens",
    "dedupe_key",
    "dedupe_tokens",
    "frontmatter_values",
    "link_target",
    "path_target",
    "qualified",
    "split_frontmatter",
]

Row = Mapping[str, Any]

_WIKI = re.compile(r"\[\[([^\]]+)\]\]")
_PATH_LINK = re.compile(r"\[([^\[\]]*)\]\((/[^)\t\n\x0b\f\r ]+)\)")
_APP_URL = re.compile(r"/d/n/[0-9]+(/.*)?|/n/[0-9]+(/.*)?|/n[0-9]+", re.DOTALL)
_KEY_LINE = re.compile(r"([^\s#\-][^:]*?):(?:[ \t]+(.*))?$")
_ITEM_LINE = re.compile(r"[ \t]*-[ \t]+(.*)$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_JAVA_BLANKS = "".join(chr(c) for c in range(33))  # Java's String.trim() strips every char <= ' '


def _jtrim(text: str) -> str:
    return text.strip(_JAVA_BLANKS)


# -- tokens ---------------------------------------------------------------------------------------
def split_frontmatter(content: str) -> tuple[str, str] | None:
    """``(yaml, body)`` of a leading ``---`` block closed by a later ``---`` line, else None."""
    lines = content.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff").split("\n")
    if lines[0] != "---":
        return None
    for i in range(1, len(lines)):
        if lines[i] == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    return None


def _scalar(raw: str) -> str | None:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), raw[1:-1])
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1].replace("''", "'")
    if not raw or raw[0] in "[{|>&*!":
        return None  # null, a flow collection, a block scalar, an anchor or a tag
    return re.sub(r"[ \t]+#.*$", "", raw)


def _flush(out: list[str], items: list[str | None] | None) -> None:
    """A block list counts only when every item is a scalar (else Doughnut drops the property)."""
    if items and all(item is not None for item in items):
        out.extend(item for item in items if item is not None)


def frontmatter_values(yaml_text: str) -> list[str]:
    """The supported value strings of a YAML block in key order (list items in place)."""
    out: list[str] = []
    items: list[str | None] | None = None  # the block list under the current key, if any
    for line in yaml_text.split("\n"):
        key, item = _KEY_LINE.match(line), _ITEM_LINE.match(line)
        if key:
            _flush(out, items)
            raw = key.group(2) or ""
            items = None if raw.strip() else []
            value = _scalar(raw)
            out.extend([value] if value is not None else [])
        elif item and items is not None:
            items.append(_scalar(item.group(1)))
        elif line.strip():
            _flush(out, items)
            items = None
    _flush(out, items)
    return out


def _concept_href(href: str) -> bool:
    if not href.startswith("/") or href.startswith("//"):
        return False
    path = href.split("?", 1)[0].split("#", 1)[0]
    return _APP_URL.fullmatch(path) is None


def _tokens_in(text: str) -> list[str]:
    hits = [(m.start(), _jtrim(m.group(1))) for m in _WIKI.finditer(text)]
    hits = [h for h in hits if h[1]]
    hits += [(m.start(), m.group(0)) for m in _PATH_LINK.finditer(text)
             if (m.start() == 0 or text[m.start() - 1] != "!") and _concept_href(m.group(2))]
    return [token for _, token in sorted(hits, key=lambda h: h[0])]


def authored_tokens(content: str | None) -> list[str]:
    """Link tokens in Doughnut's order: frontmatter values first, then the body."""
    if not content:
        return []
    split = split_frontmatter(content)
    if split is None:
        return _tokens_in(content)
    yaml_text, body = split
    values = frontmatter_values(yaml_text) if yaml_text.strip() else []
    return [t for v in values for t in _tokens_in(v)] + _tokens_in(body)


def dedupe_key(token: str) -> str:
    """NFKC, then lower case: two tokens with one key make one row."""
    return unicodedata.normalize("NFKC", token).lower()


def dedupe_tokens(tokens: Iterable[str]) -> list[str]:
    """The first spelling of each dedupe key, in order."""
    kept: dict[str, str] = {}
    for token in tokens:
        kept.setdefault(dedupe_key(token), token)
    return list(kept.values())


# -- targets --------------------------------------------------------------------------------------
def link_target(token: str) -> str:
    """The resolution key of a token: a path link's href, else the inner text before ``|``."""
    link = _PATH_LINK.fullmatch(_jtrim(token))
    if link and _concept_href(link.group(2)):
        return link.group(2)
    return token.partition("|")[0]  # a blank display also means "no display": same target


def qualified(target: str) -> tuple[str, str] | None:
    """``(notebook, title)`` when the first colon splits the target into two non-blank parts."""
    i = target.find(":")
    if i <= 0 or i >= len(target) - 1:
        return None
    notebook, title = _jtrim(target[:i]), _jtrim(target[i + 1 :])
    return (notebook, title) if notebook and title else None


@dataclass(frozen=True)
class PathTarget:
    """A path-shaped target: folder names from the notebook root, then the note title."""

    folders: tuple[str, ...]
    title: str


def path_target(title: str) -> PathTarget | None:
    """The folders and title of ``A/B/Title[.md]`` or ``/Title[.md]``; None when not path-shaped."""
    leading = title.startswith("/")
    if ":" in title or (not leading and "/" not in title):
        return None
    segments = [s for s in (_jtrim(p) for p in title.split("/")) if s]
    if not segments or (len(segments) < 2 and not leading):
        return None
    last = segments[-1]
    name = last[:-3] if len(last) > 3 and last[-3:].lower() == ".md" else last
    return PathTarget(tuple(segments[:-1]), name) if name else None


def _fold(text: str) -> str:
    return text.lower().rstrip(" ")


def _live_at(row: Row, moment: dt.datetime) -> bool:
    created, deleted = row.get("created_at"), row.get("deleted_at")
    return (created is None or created <= moment) and (deleted is None or deleted > moment)


def _saved_at(note: Row) -> dt.datetime:
    updated: dt.datetime | None = note.get("updated_at")
    created: dt.datetime = note["created_at"]
    return updated if note.get("deleted_at") is None and updated is not None else created


# -- the world ------------------------------------------------------------------------------------
class LinkWorld:
    """An in-memory index of one database's rows, answering "what would Doughnut resolve?"."""

    def __init__(self, rows: Mapping[str, Iterable[Row]]) -> None:
        self.notes = {r["id"]: r for r in rows["note"]}
        self.folders = {r["id"]: r for r in rows.get("folder", ())}
        self.notebooks = {r["id"]: r for r in rows["notebook"]}
        self._owner = {r["id"]: (r.get("user_id"), r.get("circle_id"))
                       for r in rows.get("ownership", ())}
        self._members: dict[int, list[int]] = defaultdict(list)
        for r in rows.get("circle_user", ()):
            self._members[r["circle_id"]].append(r["user_id"])
        self._subscribed: dict[int, set[int]] = defaultdict(set)
        for r in rows.get("subscription", ()):
            self._subscribed[r["user_id"]].add(r["notebook_id"])
        self._bazaar = {r["notebook_id"] for r in rows.get("bazaar_notebook", ())}
        self._by_title: dict[tuple[str, str], list[int]] = defaultdict(list)
        for note_id in sorted(self.notes):
            note = self.notes[note_id]
            if note["notebook_id"] is not None:
                name = self.notebooks[note["notebook_id"]]["name"]
                self._by_title[(_fold(name), _fold(note["title"]))].append(note_id)
        self._trails: dict[int | None, tuple[str, ...]] = {None: ()}
        self._readable: dict[int | None, frozenset[int]] = {}

    def saver(self, note: Row) -> int | None:
        """The user whose readability the note's links were resolved with."""
        if note["notebook_id"] is None:
            return None
        user, circle = self._owner[self.notebooks[note["notebook_id"]]["ownership_id"]]
        if user is None and circle is not None and self._members.get(circle):
            return min(self._members[circle])
        return user

    def readable(self, user: int | None) -> frozenset[int]:
        """Notebooks the user may read: owned (directly or via a circle), subscribed, bazaar."""
        if user not in self._readable:
            owners: set[tuple[int | None, int | None]] = {(user, None)} if user is not None else set()
            owners |= {(None, c) for c, members in self._members.items() if user in members}
            owned = {nb for nb, row in self.notebooks.items()
                     if self._owner[row["ownership_id"]] in owners}
            subscribed = self._subscribed.get(user, set()) if user is not None else set()
            self._readable[user] = frozenset(owned | subscribed | self._bazaar)
        return self._readable[user]

    def trail(self, folder_id: int | None) -> tuple[str, ...]:
        """Folder names from the notebook root down to ``folder_id``."""
        if folder_id not in self._trails:
            row = self.folders[folder_id]
            self._trails[folder_id] = (*self.trail(row["parent_folder_id"]), row["name"])
        return self._trails[folder_id]

    def resolve(self, note: Row, token: str) -> int | None:
        """The note id ``token`` in ``note`` resolves to when the note is saved, or None (dead)."""
        target = link_target(token)
        if not target.strip():
            return None
        named = qualified(target)
        own = self.notebooks.get(note["notebook_id"]) if note["notebook_id"] is not None else None
        if named is None and (own is None or not own["name"].strip()):
            return None
        notebook, title = named or (own["name"] if own else "", target)
        path = path_target(title)
        return self._first(notebook, path.title if path else title, path, note)

    def _first(self, notebook: str, title: str, path: PathTarget | None, note: Row) -> int | None:
        moment, readable = _saved_at(note), self.readable(self.saver(note))
        for candidate_id in self._by_title.get((_fold(notebook), _fold(title)), ()):
            candidate = self.notes[candidate_id]
            home = self.notebooks[candidate["notebook_id"]]
            if not (_live_at(candidate, moment) and _live_at(home, moment)):
                continue
            if path is not None and not self._on_path(candidate, path):
                continue
            if candidate["notebook_id"] in readable:
                return candidate_id
        return None

    def _on_path(self, candidate: Row, path: PathTarget) -> bool:
        trail = self.trail(candidate["folder_id"])
        return len(trail) == len(path.folders) and all(
            a.lower() == b.lower() for a, b in zip(trail, path.folders, strict=True))

    def links(self, note: Row) -> list[tuple[str, int]]:
        """``(link_text, target id)`` per resolved, deduplicated token, in token order."""
        content = note.get("content")
        if content is None or not content.strip():
            return []
        resolved = ((t, self.resolve(note, t)) for t in dedupe_tokens(authored_tokens(content)))
        return [(text, target) for text, target in resolved if target is not None]

    def cache_rows(self, first_id: int = 1) -> Iterator[dict[str, Any]]:
        """Every note's rows, numbered in save order (then note id), as Doughnut's saves number them."""
        row_id = first_id
        for note in sorted(self.notes.values(), key=lambda n: (_saved_at(n), n["id"])):
            for text, target in self.links(note):
                yield {"id": row_id, "note_id": note["id"], "target_note_id": target, "link_text": text}
                row_id += 1
