"""The ``doughnut-2025`` schema profile: Doughnut's note tree, read in batches.

One ``note`` table: ``parent_id`` makes the tree, ``target_note_id`` makes a link note, children are
ordered by (``sibling_order``, id). Every kind of need (skeletons, children by parent, inbound link
notes by target, ancestor chains, rendered rows) is one IN statement per chunk of ids; children and
inbound lists are integers only, packed one row per owner with GROUP_CONCAT on MySQL/MariaDB (a
list the session cap cut short is detected by its length and read again row by row). Titles and
details are read only for notes that may be shown. The service never writes here except through
:mod:`storage.profiles.admin` for demos and tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError

from graphrag import GraphView, Need, Ref, Row, Skeleton
from graphrag.core.errors import DatabaseUnavailable, SchemaMismatch
from service.binding import DatabaseIdentity
from service.ports import Cursor, Loader, Piece
from storage.database import chunks, epoch_ms, reason, translated
from storage.profiles.identity import identity_of
from storage.profiles.notebook_pieces import notebook_pieces
from storage.profiles.tables_2025 import (
    DETAILS_COLUMNS,
    FIXED_COLUMNS,
    SKELETON_WIDTH,
    TITLE_COLUMNS,
    TreeStatements,
    note_table,
)

__all__ = ["NAME", "Doughnut2025", "matches"]

NAME = "doughnut-2025"


def _columns(engine: Engine) -> set[str]:
    try:
        return {c["name"] for c in inspect(engine).get_columns("note")}
    except NoSuchTableError as err:
        raise SchemaMismatch("table 'note' does not exist (run `graphrag db init`?)") from err
    except SQLAlchemyError as err:
        raise DatabaseUnavailable(f"database unreachable: {reason(err)}") from err


def matches(columns: set[str]) -> bool:
    """Whether a ``note`` table with these columns is the tree layout."""
    return "parent_id" in columns


def _pick(columns: set[str], choices: tuple[str, ...]) -> str | None:
    return next((c for c in choices if c in columns), None)


def missing(columns: set[str]) -> list[str]:
    """The columns of ``note`` this layout reads that ``columns`` lacks (named for an error)."""
    out = [c for c in FIXED_COLUMNS if c not in columns]
    out += [] if _pick(columns, TITLE_COLUMNS) else ["one of " + "/".join(TITLE_COLUMNS)]
    out += [] if _pick(columns, DETAILS_COLUMNS) else ["one of " + "/".join(DETAILS_COLUMNS)]
    return out


class Doughnut2025:
    """A :class:`service.ports.NoteSource` over Doughnut 2025's ``note`` table."""

    profile = NAME
    model = "tree"

    def __init__(self, engine: Engine, *, in_chunk: int = 100) -> None:
        if not 1 <= in_chunk <= 1000:
            raise ValueError("in_chunk must be between 1 and 1000")
        self.engine, self.in_chunk = engine, in_chunk
        self._sql: TreeStatements | None = None
        self._notebooks = False  # whether ``note`` has Doughnut's ``notebook_id`` (optional here)

    # -- schema ---------------------------------------------------------------------------------
    def check(self) -> None:
        """Fail naming the missing columns when ``note`` is not Doughnut-2025-shaped."""
        self._statements()

    def _statements(self) -> TreeStatements:
        if self._sql is None:
            columns = _columns(self.engine)
            lacking = missing(columns)
            if lacking:
                raise SchemaMismatch(f"table 'note' lacks column(s): {', '.join(lacking)}")
            title, details = _pick(columns, TITLE_COLUMNS), _pick(columns, DETAILS_COLUMNS)
            assert title is not None and details is not None
            self._notebooks = "notebook_id" in columns
            self._sql = TreeStatements(note_table(title, details))
        return self._sql

    @property
    def table(self) -> Table:
        return self._statements().note

    def ping(self) -> None:
        with translated("database unreachable"), self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    # -- batched reads --------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[Loader]:
        try:
            sql = self._statements()
        except SchemaMismatch as err:  # for a computation, a broken database is an unavailable one
            raise DatabaseUnavailable(f"database error: {err}") from err
        with translated("database unreachable"), self.engine.connect() as conn:
            yield lambda view, need: self._load(sql, conn, view, need)

    def _load(self, sql: TreeStatements, conn: Connection, view: GraphView, need: Need) -> None:
        with translated():
            if need.rows:
                self._rows(sql, conn, view, need.rows)
            if need.ancestors:
                self._ancestors(sql, conn, view, need.ancestors)
            notes = view.missing(Need(notes=need.notes)).notes
            if notes:
                self._skeletons(sql, conn, view, notes)
            if need.children:
                self._lists(sql, conn, need.children, "children", view.put_child_ids)
            if need.inbound:
                self._lists(sql, conn, need.inbound, "inbound", view.put_referrer_ids)

    def _skeletons(self, sql: TreeStatements, conn: Connection, view: GraphView,
                   ids: Iterable[int]) -> None:
        for chunk in chunks(ids, self.in_chunk):
            found = conn.execute(sql.skeletons, {"ids": chunk}).tuples()
            view.put_skeletons(_skeleton(*r) for r in found)
            view.put_absent(chunk)

    def _lists(self, sql: TreeStatements, conn: Connection, ids: Iterable[int], kind: str,
               put: Any) -> None:
        """Children (in sibling order) or referrers (by id) as (owner, id) integer pairs."""
        packed = conn.dialect.name in ("mysql", "mariadb")
        for chunk in chunks(ids, self.in_chunk):
            found, cut = _packed_lists(sql, conn, chunk, kind) if packed else ({}, chunk)
            if cut:
                found.update(_row_lists(sql, conn, cut, kind))
            for owner, members in found.items():
                put(owner, members)

    def _ancestors(self, sql: TreeStatements, conn: Connection, view: GraphView,
                   ids: Iterable[int]) -> None:
        for chunk in chunks(ids, self.in_chunk):
            found = conn.execute(sql.ancestors, {"ids": chunk}).tuples()
            view.put_skeletons(_skeleton(*r) for r in found)
            view.put_absent(chunk)

    def _rows(self, sql: TreeStatements, conn: Connection, view: GraphView,
              ids: Iterable[int]) -> None:
        for chunk in chunks(ids, self.in_chunk):
            for r in conn.execute(sql.rows, {"ids": chunk}).tuples():
                view.put_row(_skeleton(*r[:SKELETON_WIDTH]), _row(*r))
            view.put_absent_rows(chunk)

    # -- edits and paging -----------------------------------------------------------------------
    def edit_scope(self, roots: Iterable[int], *, limit: int = 10_000) -> set[int]:
        """Descendants of ``roots`` (deleted or not), the link notes pointing into that subtree, and
        the link notes pointing at those.

        Doughnut's soft delete stamps a note, its descendants and the link notes pointing at them,
        and a restore clears them again: every one of those notes changed. A link note pointing at
        one of those links is not stamped, but its object goes and comes back with it, so its
        rendering changed too (and a snapshot of it computed meanwhile no longer lists the object
        it regains). Bounded by ``limit``.
        """
        sql = self._statements()
        found = set(roots)
        frontier = set(found)
        with translated(), self.engine.connect() as conn:
            while frontier and len(found) < limit:
                frontier = self._ids(conn, sql.below, frontier) - found
                found |= frontier
            for _ in range(2):  # the links into the subtree, then the links to those
                found |= self._ids(conn, sql.referrers, found)
        return found

    def access_reach(self, notebooks: Iterable[int], circles: Iterable[int],
                     ownerships: Iterable[int]) -> tuple[set[int], set[int]]:
        """The tree has no notebooks' access."""
        return set(), set()

    def referrers_of(self, ids: Iterable[int]) -> dict[int, set[int]]:
        """Per id, the link notes targeting it, deleted or not."""
        sql = self._statements()
        with translated(), self.engine.connect() as conn:
            return {i: self._ids(conn, sql.referrers, [i]) for i in ids}

    def _ids(self, conn: Connection, statement: Any, ids: Iterable[int]) -> set[int]:
        out: set[int] = set()
        for chunk in chunks(ids, self.in_chunk):
            out.update(conn.execute(statement, {"ids": chunk}).scalars())
        return out

    def live_ids_after(self, after_id: int, limit: int) -> list[int]:
        statement = self._statements().live_ids_after(after_id, limit)
        with translated(), self.engine.connect() as conn:
            return list(conn.execute(statement).scalars())

    def count_live(self) -> int:
        with translated(), self.engine.connect() as conn:
            return int(conn.execute(self._statements().count_live).scalar_one())

    def workspaces(self, max_notes: int, *, after: Cursor = None) -> Iterator[Piece]:
        """Per notebook when ``note`` has ``notebook_id`` (a tree lives in one notebook), else
        runs of consecutive live ids (as notes in no notebook)."""
        sql = self._statements()
        if self._notebooks:
            yield from notebook_pieces(self.engine, sql.note, max_notes, after)
            return
        last = 0 if after is None else after[1]
        while ids := self.live_ids_after(last, max(1, max_notes)):
            yield Piece(None, ids)
            last = ids[-1]

    def any_note(self) -> bool:
        with translated(), self.engine.connect() as conn:
            return conn.execute(self._statements().any_note).first() is not None

    def identity(self) -> DatabaseIdentity:
        return identity_of(self.engine, NAME)


def _skeleton(note_id: int, parent_id: int | None, target_id: int | None, sibling_order: int,
              deleted: Any) -> Skeleton:
    """A skeleton from the columns of ``TreeStatements.skeleton_cols``, in their order (rows are
    read as plain tuples: naming each column of each row cost a quarter of the read)."""
    return Skeleton(note_id, parent_id, target_id, int(sibling_order), bool(deleted))


def _row_lists(sql: TreeStatements, conn: Connection, owners: list[int],
               kind: str) -> dict[int, list[int]]:
    """One row per member: the portable form, and the fallback for an over-long packed list."""
    found: dict[int, list[int]] = {owner: [] for owner in owners}
    for owner, note_id in conn.execute(sql.row_lists[kind], {"ids": owners}).tuples():
        found[owner].append(note_id)
    return found


def _packed_lists(
    sql: TreeStatements, conn: Connection, owners: list[int], kind: str
) -> tuple[dict[int, list[int]], list[int]]:
    """Every owner's members from one row per owner with a GROUP_CONCAT string (MySQL/MariaDB):
    the driver decodes a few strings instead of a row per member. Returns the lists and the
    owners whose list ``group_concat_max_len`` cut short (its length is not that of all the ids
    and separators: a cut inside the last id still shows), to read again."""
    found: dict[int, list[int]] = {owner: [] for owner in owners}
    cut: list[int] = []
    for owner, count, digits, packed in conn.execute(sql.packed_lists[kind], {"ids": owners}).tuples():
        text = packed.decode() if isinstance(packed, bytes) else str(packed or "")
        if len(text) == int(digits) + count - 1:  # every id and separator arrived
            found[owner] = [int(i) for i in text.split(",")]
        else:
            del found[owner]
            cut.append(owner)
    return found, cut


def _row(note_id: int, _parent_id: Any, target_id: int | None, _order: Any, _deleted: Any,
         title: str, details: str | None, created_at: Any, p_id: int | None, p_title: Any,
         t_id: int | None, t_title: Any) -> Row:
    """A row from the columns of ``TreeStatements.rows``, in their order."""
    return Row(
        id=note_id,
        title=title,
        details=details,
        created_at_ms=epoch_ms(created_at),
        is_link=target_id is not None,
        parent=Ref(p_id, p_title) if p_id is not None else None,
        target=Ref(t_id, t_title) if t_id is not None else None,
    )
