"""The ``doughnut-2026`` schema profile: today's Doughnut (folders, notebooks, wiki links).

Notes live in folders inside notebooks; links are the rows of ``note_wiki_title_cache`` that Doughnut
writes when it saves a note (never a re-parse of ``content``: Doughnut resolves links at save time,
and resolving them again would disagree with it). Visibility comes from ``ownership``,
``subscription``, ``circle_user`` and ``bazaar_notebook``. The needs of the focus-context strategy
(``graphrag.wiki.model.WikiNeed``) are answered in batches by the statements of
:mod:`storage.profiles.wiki_statements`; link lists and sampled lists come back as ids, and the rows
of the notes they name are read after them, only those the view does not hold yet (so a row is
decoded once while a view lives, however many lists name it); a list shorter than asked is marked
complete.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.engine import Connection, Engine

from graphrag.core.errors import DatabaseUnavailable, SchemaMismatch
from graphrag.wiki.model import (
    Access,
    Folder,
    Notebook,
    PeerKey,
    ReferrerKey,
    Viewer,
    WikiNeed,
    WikiNote,
)
from graphrag.wiki.view import WikiView
from service.binding import DatabaseIdentity
from service.ports import Cursor, Loader, Piece, TokenOwner
from storage.database import chunks, epoch_ms, translated
from storage.profiles import wiki_statements as sql
from storage.profiles.identity import identity_of
from storage.profiles.notebook_pieces import notebook_pieces
from storage.profiles.tables_2026 import (
    REQUIRED,
    missing_columns,
    note,
    note_wiki_title_cache,
    notebook,
    ownership,
    user_token,
)

__all__ = ["NAME", "Doughnut2026", "matches", "missing"]

NAME = "doughnut-2026"
#: A notebook whose ownership row is missing has no owner; this viewer stands for "nobody".
NOBODY = Viewer(user_id=0)


def matches(tables: dict[str, set[str]]) -> bool:
    """Whether a database with these tables and columns is the wiki layout."""
    return "folder_id" in tables.get("note", set()) and "note_wiki_title_cache" in tables


def missing(tables: dict[str, set[str]]) -> list[str]:
    """What the layout reads that the database lacks: ``table`` or ``table.column``."""
    out = []
    for table, columns in REQUIRED.items():
        if table not in tables:
            out.append(f"table {table}")
        else:
            out += [f"{table}.{c}" for c in columns if c not in tables[table]]
    return out


def _note(r: Any) -> WikiNote:
    return WikiNote(r.n_id, r.n_notebook, r.n_folder, r.n_title, r.n_content,
                    epoch_ms(r.n_created), bool(r.n_deleted))


def _owner(user_id: int | None, circle_id: int | None) -> Viewer:
    if user_id is not None:
        return Viewer(user_id=user_id)
    return NOBODY if circle_id is None else Viewer(circle_id=circle_id)


class Doughnut2026:
    """A :class:`service.ports.NoteSource` over Doughnut 2026's tables (the wiki model)."""

    profile = NAME
    model = "wiki"

    def __init__(self, engine: Engine, *, in_chunk: int = 100) -> None:
        if not 1 <= in_chunk <= 1000:
            raise ValueError("in_chunk must be between 1 and 1000")
        self.engine, self.in_chunk = engine, in_chunk
        self._checked = False

    # -- schema ---------------------------------------------------------------------------------
    def check(self) -> None:
        """Fail naming every missing table and column."""
        with translated("database unreachable"):
            lacking = missing_columns(self.engine)
        if lacking:
            named = [f"{t}.{c}" if c else f"table {t}" for t, cols in lacking.items()
                     for c in (cols or [""])]
            raise SchemaMismatch(f"the database lacks {', '.join(named)} (doughnut-2026)")
        self._checked = True

    def ping(self) -> None:
        with translated("database unreachable"), self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    # -- batched reads --------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[Loader]:
        if not self._checked:
            try:
                self.check()
            except SchemaMismatch as err:  # for a computation, a broken database is unavailable
                raise DatabaseUnavailable(f"database error: {err}") from err
        with translated("database unreachable"), self.engine.connect() as conn:
            yield lambda view, need: self._load(conn, view, need)

    def _load(self, conn: Connection, view: WikiView, need: WikiNeed) -> None:
        with translated():
            self._by_ids(conn, sql.FOLDER_CHAINS, need.folders, lambda rows: view.put_folders(
                Folder(r.id, r.notebook_id, r.parent_folder_id, r.name) for r in rows),
                view.put_absent_folders)
            self._by_ids(conn, sql.NOTEBOOKS, need.notebooks, lambda rows: view.put_notebooks(
                Notebook(r.id, r.name, _owner(r.user_id, r.circle_id)) for r in rows),
                view.put_absent_notebooks)
            named, sampled = set(need.notes), set[int]()  # with the lists' notes: rows read last
            self._links(conn, view, need.links, named)
            self._referrers(conn, view, need.referrer_lengths(), sampled)
            self._peers(conn, view, need.peer_lengths(), sampled)
            self._rows_of(conn, view, named | sampled, live=sampled)
            self._access(conn, view, need.access)

    def _by_ids(self, conn: Connection, statement: Any, ids: Iterable[int], put: Any,
                absent: Any) -> None:
        for chunk in chunks(ids, self.in_chunk):
            put(conn.execute(statement, {"ids": chunk}))
            absent(chunk)

    def _notes(self, conn: Connection, view: WikiView, ids: Iterable[int]) -> None:
        self._by_ids(conn, sql.NOTES, ids, lambda rows: view.put_notes(map(_note, rows)),
                     view.put_absent_notes)

    def _rows_of(self, conn: Connection, view: WikiView, ids: set[int], *, live: set[int]) -> None:
        """The rows of the notes in ``ids`` the view does not hold yet (each row read once while
        the view lives: a link target or a sampled note is often one it already has), and of the
        ``live`` ones (just sampled as live notes) it holds as absent from an earlier read."""
        self._notes(conn, view, view.unread_notes(ids, live=live))

    def _links(self, conn: Connection, view: WikiView, ids: Iterable[int], named: set[int]) -> None:
        for chunk in chunks(ids, self.in_chunk):
            targets: dict[int, list[int]] = {i: [] for i in chunk}
            for r in conn.execute(sql.LINKS, {"ids": chunk}):
                targets[r.note_id].append(r.target_note_id)
            for note_id, ordered in targets.items():
                view.put_links(note_id, ordered)
                named.update(ordered)

    def _referrers(self, conn: Connection, view: WikiView, wanted: dict[ReferrerKey, int],
                   sampled: set[int]) -> None:
        groups: dict[tuple[int | None, Viewer], dict[int, int]] = defaultdict(dict)
        for (target, seed, viewer), n in wanted.items():
            groups[(seed, viewer)][target] = n
        for (seed, viewer), lengths in groups.items():
            for chunk in chunks(lengths, self.in_chunk):
                limit = max(lengths[t] for t in chunk)
                found = self._sampled(conn, sql.referrers(seed, viewer.user_id, limit), chunk, sampled)
                for target in chunk:
                    ids = found[target]
                    view.put_referrers((target, seed, viewer), ids, len(ids) < limit)

    def _peers(self, conn: Connection, view: WikiView, wanted: dict[PeerKey, int],
               sampled: set[int]) -> None:
        groups: dict[tuple[bool, int | None], dict[int, int]] = defaultdict(dict)
        for (notebook_id, folder_id, seed), n in wanted.items():
            owner = folder_id if folder_id is not None else notebook_id
            if owner is not None:
                groups[(folder_id is not None, seed)][owner] = n
        for (in_folder, seed), lengths in groups.items():
            for chunk in chunks(lengths, self.in_chunk):
                limit = max(lengths[o] for o in chunk)
                statement = (sql.folder_peers if in_folder else sql.root_peers)(seed, limit)
                found = self._sampled(conn, statement, chunk, sampled)
                self._put_peers(view, wanted, in_folder, seed, found, limit)

    @staticmethod
    def _put_peers(view: WikiView, wanted: dict[PeerKey, int], in_folder: bool, seed: int | None,
                   found: dict[int, list[int]], limit: int) -> None:
        for key in wanted:
            notebook_id, folder_id, key_seed = key
            owner = folder_id if in_folder else notebook_id
            if key_seed == seed and (folder_id is not None) == in_folder and owner in found:
                view.put_peers(key, found[owner], len(found[owner]) < limit)

    @staticmethod
    def _sampled(conn: Connection, statement: sql.Sampled, owners: list[int],
                 sampled: set[int]) -> dict[int, list[int]]:
        """Each owner's sampled ids, in order; every id is added to ``sampled`` too."""
        found: dict[int, list[int]] = {o: [] for o in owners}
        query, params = statement
        for r in conn.execute(query, {"ids": owners, **params}):
            found[r.owner].append(r.n_id)
            sampled.add(r.n_id)
        return found

    def _access(self, conn: Connection, view: WikiView, pairs: Iterable[tuple[Viewer, int]]) -> None:
        by_viewer: dict[Viewer, list[int]] = defaultdict(list)
        for viewer, notebook_id in pairs:
            by_viewer[viewer].append(notebook_id)
        for viewer, notebook_ids in by_viewer.items():
            statement, params = sql.access(viewer.user_id, viewer.circle_id)
            for chunk in chunks(notebook_ids, self.in_chunk):
                seen = set()
                for r in conn.execute(statement, {"ids": chunk, **params}):
                    view.put_access(viewer, r.id, _grant(viewer, r))
                    seen.add(r.id)
                for notebook_id in set(chunk) - seen:
                    view.put_access(viewer, notebook_id, Access(False, False))

    # -- edits and paging -----------------------------------------------------------------------
    def edit_scope(self, roots: Iterable[int], *, limit: int = 10_000) -> set[int]:
        """A 2026 delete or restore changes the note alone (its referrers are found by the wiki
        model's own resolver)."""
        return set(roots)

    def referrers_of(self, ids: Iterable[int]) -> dict[int, set[int]]:
        """Every note with a link row to each id, deleted or not (a delete changes their lists)."""
        c = note_wiki_title_cache
        out: dict[int, set[int]] = {i: set() for i in ids}
        with translated(), self.engine.connect() as conn:
            for chunk in chunks(out, self.in_chunk):
                statement = select(c.c.target_note_id, c.c.note_id).where(c.c.target_note_id.in_(chunk))
                for target, referrer in conn.execute(statement):
                    out[target].add(referrer)
        return out

    def access_reach(self, notebooks: Iterable[int], circles: Iterable[int],
                     ownerships: Iterable[int]) -> tuple[set[int], set[int]]:
        books, owners, held = set(notebooks), list(ownerships), list(circles)
        links = note_wiki_title_cache
        with translated(), self.engine.connect() as conn:
            if owners or held:
                owned = select(notebook.c.id).join(ownership, notebook.c.ownership_id == ownership.c.id)
                books.update(conn.execute(owned.where(or_(ownership.c.id.in_(owners),
                                                          ownership.c.circle_id.in_(held)))).scalars())
            targets: set[int] = set()
            for chunk in chunks(books, self.in_chunk):
                statement = (select(links.c.target_note_id).distinct()
                             .join(note, note.c.id == links.c.note_id)
                             .where(note.c.notebook_id.in_(chunk), note.c.deleted_at.is_(None)))
                targets.update(conn.execute(statement).scalars())
        return books, targets

    def token_owner(self, token: str) -> TokenOwner | None:
        """The ``user_token`` row of ``token``, compared by the column's collation (as Doughnut's
        own lookup compares it)."""
        statement = select(user_token.c.user_id, user_token.c.expires_at).where(
            user_token.c.token == token)
        with translated("cannot read Doughnut's user_token table (GRAPHRAG_READER_AUTH)"), \
                self.engine.connect() as conn:
            row = conn.execute(statement).first()
        if row is None:
            return None
        return TokenOwner(int(row[0]), None if row[1] is None else epoch_ms(row[1]))

    def live_ids_after(self, after_id: int, limit: int) -> list[int]:
        statement = (select(note.c.id).where(note.c.id > after_id, note.c.deleted_at.is_(None))
                     .order_by(note.c.id).limit(limit))
        with translated(), self.engine.connect() as conn:
            return list(conn.execute(statement).scalars())

    def count_live(self) -> int:
        statement = select(func.count()).select_from(note).where(note.c.deleted_at.is_(None))
        with translated(), self.engine.connect() as conn:
            return int(conn.execute(statement).scalar_one())

    def workspaces(self, max_notes: int, *, after: Cursor = None) -> Iterator[Piece]:
        return notebook_pieces(self.engine, note, max_notes, after)

    def any_note(self) -> bool:
        with translated(), self.engine.connect() as conn:
            return conn.execute(select(note.c.id).limit(1)).first() is not None

    def identity(self) -> DatabaseIdentity:
        return identity_of(self.engine, NAME)


def _grant(viewer: Viewer, r: Any) -> Access:
    """Doughnut's two rules (see :mod:`graphrag.wiki.model`) from one row of the access statement."""
    owns = viewer.user_id is not None and r.user_id == viewer.user_id
    member, subscribed, bazaar = bool(r.member), bool(r.subscribed), bool(r.bazaar)
    return Access(readable=owns or member or subscribed or bazaar, inbound_visible=owns or subscribed)
