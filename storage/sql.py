"""Every SQL statement of the service, in SQLAlchemy Core, against Doughnut's ``note`` table.

Reads are batched: each kind of need (skeletons by id, children by parent, inbound link notes by
target, ancestor chains, rendered rows) is one ``IN`` statement per chunk of at most ``in_chunk`` ids
(50-100: MySQL switches from index dives to statistics at 200 values). Children and inbound lists are
integers only; titles and details are read just for notes that may be shown. The service never writes
to ``note`` except ``db init`` / ``db load-sample`` for demos and tests.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    event,
    func,
    inspect,
    literal,
    literal_column,
    select,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError

from graphrag.errors import DatabaseUnavailable, SchemaMismatch
from graphrag.model import Need, Ref, Row, Skeleton
from graphrag.view import GraphView

__all__ = ["REQUIRED_COLUMNS", "NoteStore", "metadata", "note"]

_UINT = Integer().with_variant(mysql.INTEGER(unsigned=True), "mysql", "mariadb")
_TS = DateTime().with_variant(mysql.TIMESTAMP(), "mysql", "mariadb")
_TS3 = DateTime().with_variant(mysql.TIMESTAMP(fsp=3), "mysql", "mariadb")

metadata = MetaData()
#: Doughnut's table, reduced to the columns the service reads plus the ones it shows in demos.
note = Table(
    "note",
    metadata,
    Column("id", _UINT, primary_key=True, autoincrement=True),
    Column("parent_id", _UINT, nullable=True),
    Column("target_note_id", _UINT, nullable=True),
    Column("sibling_order", BigInteger, nullable=False, server_default="1"),
    Column("topic_constructor", String(150), nullable=False),
    Column("description", Text, nullable=True),
    Column("created_at", _TS, nullable=False),
    Column("updated_at", _TS, nullable=True),
    Column("deleted_at", _TS3, nullable=True),
    Column("notebook_id", _UINT, nullable=True),
    Column("creator_id", _UINT, nullable=True),
    Index("parent_id_2", "parent_id"),
    Index("target_note_id", "target_note_id"),
    Index("parent_id", "sibling_order"),
    Index("fk_note_notebook_id", "notebook_id"),
    mysql_charset="utf8mb4",
)
REQUIRED_COLUMNS = (
    "id",
    "parent_id",
    "target_note_id",
    "sibling_order",
    "topic_constructor",
    "description",
    "created_at",
    "deleted_at",
)
_ANCESTOR_ROUND = 64  # parent hops one recursive statement follows; longer chains take more rounds
_EPOCH = dt.datetime(1970, 1, 1)


def _skeleton_cols(t: Any) -> list[Any]:
    return [
        t.c.id,
        t.c.parent_id,
        t.c.target_note_id,
        t.c.sibling_order,
        t.c.deleted_at.is_not(None).label("deleted"),
    ]


def _skeleton(r: Any) -> Skeleton:
    return Skeleton(r.id, r.parent_id, r.target_note_id, int(r.sibling_order), bool(r.deleted))


_IDS: Any = bindparam("ids", expanding=True)


def _rows_statement() -> Any:
    n, p, t = note.alias("n"), note.alias("p"), note.alias("t")
    return (
        select(
            *_skeleton_cols(n), n.c.topic_constructor, n.c.description, n.c.created_at,
            p.c.id.label("p_id"), p.c.topic_constructor.label("p_title"),
            t.c.id.label("t_id"), t.c.topic_constructor.label("t_title"),
        )
        .outerjoin(p, (p.c.id == n.c.parent_id) & p.c.deleted_at.is_(None))
        .outerjoin(t, (t.c.id == n.c.target_note_id) & t.c.deleted_at.is_(None))
        .where(n.c.id.in_(_IDS))
    )


def _ancestors_statement() -> Any:
    seed = (
        select(note.c.id, note.c.parent_id, literal(0).label("hops"))
        .where(note.c.id.in_(_IDS))
        .cte("chain", recursive=True)
    )
    up = note.alias("up")
    chain = seed.union_all(
        select(up.c.id, up.c.parent_id, seed.c.hops + 1).where(
            up.c.id == seed.c.parent_id, seed.c.hops < _ANCESTOR_ROUND
        )
    )
    ids_in_chain = select(chain.c.id).distinct().scalar_subquery()
    return select(*_skeleton_cols(note)).where(note.c.id.in_(ids_in_chain))


def _list_order(by: Any) -> tuple[Any, ...]:
    return (note.c.sibling_order, note.c.id) if by is note.c.parent_id else (note.c.id,)


def _row_list_statement(by: Any) -> Any:
    return (select(by, note.c.id).where(by.in_(_IDS), note.c.deleted_at.is_(None))
            .order_by(by, *_list_order(by)))


def _packed_list_statement(by: Any) -> Any:
    order = ", ".join(f"note.{c.name}" for c in _list_order(by))
    members: Any = literal_column(f"GROUP_CONCAT(note.id ORDER BY {order} SEPARATOR ',')")
    digits = func.sum(func.length(note.c.id))
    return (select(by, func.count(), digits, members)
            .where(by.in_(_IDS), note.c.deleted_at.is_(None)).group_by(by))


# Built once: SQLAlchemy caches their compiled form; only the expanding ``ids`` vary.
_SKELETONS = select(*_skeleton_cols(note)).where(note.c.id.in_(_IDS))
_ROWS = _rows_statement()
_ANCESTORS = _ancestors_statement()
_ROW_LISTS = {by.name: _row_list_statement(by) for by in (note.c.parent_id, note.c.target_note_id)}
_PACKED_LISTS = {by.name: _packed_list_statement(by)
                 for by in (note.c.parent_id, note.c.target_note_id)}


def epoch_ms(moment: dt.datetime) -> int:
    """Milliseconds since the epoch of a naive UTC (or aware) datetime."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _chunks(ids: Iterable[int], size: int) -> Iterator[list[int]]:
    ordered = sorted(ids)
    for start in range(0, len(ordered), size):
        yield ordered[start : start + size]


#: Session cap on one GROUP_CONCAT list (bytes). A list cut short by it is detected by its count
#: and read again row by row, so it bounds memory, not correctness.
GROUP_CONCAT_MAX_LEN = 16 * 1024 * 1024


def _prepare_session(dbapi_connection: Any, _record: Any) -> None:
    with dbapi_connection.cursor() as cursor:
        cursor.execute("SET time_zone = '+00:00'")
        cursor.execute(f"SET SESSION group_concat_max_len = {GROUP_CONCAT_MAX_LEN}")


def prepare_engine(engine: Engine) -> Engine:
    """Make MySQL/MariaDB sessions read TIMESTAMPs in UTC, as Doughnut stores them, and allow
    long GROUP_CONCAT lists (MySQL 8's default cap is 1,024 bytes)."""
    if engine.dialect.name in ("mysql", "mariadb"):
        event.listen(engine, "connect", _prepare_session)
    return engine


class NoteStore:
    """Read access to ``note``; driver errors leave as :class:`DatabaseUnavailable`."""

    def __init__(self, engine: Engine, *, in_chunk: int = 100) -> None:
        if not 1 <= in_chunk <= 1000:
            raise ValueError("in_chunk must be between 1 and 1000")
        self.engine = engine
        self.in_chunk = in_chunk

    # -- schema -------------------------------------------------------------------------------
    def check_schema(self) -> None:
        """Fail with the names of missing columns when ``note`` is not Doughnut-shaped."""
        try:
            columns = {c["name"] for c in inspect(self.engine).get_columns("note")}
        except NoSuchTableError as err:
            raise SchemaMismatch("table 'note' does not exist (run `graphrag db init`?)") from err
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"database unreachable: {_reason(err)}") from err
        missing = [c for c in REQUIRED_COLUMNS if c not in columns]
        if missing:
            raise SchemaMismatch(f"table 'note' lacks column(s): {', '.join(missing)}")

    # -- batched reads ------------------------------------------------------------------------
    def loader(self, conn: Connection, view: GraphView) -> Any:
        """A ``load(need)`` callable for :func:`graphrag.run_batch` reading through ``conn``."""

        def load(need: Need) -> None:
            try:
                self._load(conn, view, need)
            except SQLAlchemyError as err:
                raise DatabaseUnavailable(f"database error: {_reason(err)}") from err

        return load

    def _load(self, conn: Connection, view: GraphView, need: Need) -> None:
        if need.rows:
            self._rows(conn, view, need.rows)
        if need.ancestors:
            self._ancestors(conn, view, need.ancestors)
        notes = view.missing(Need(notes=need.notes)).notes
        if notes:
            self._skeletons(conn, view, notes)
        if need.children:
            self._lists(conn, view, need.children, note.c.parent_id, view.put_child_ids)
        if need.inbound:
            self._lists(conn, view, need.inbound, note.c.target_note_id, view.put_referrer_ids)

    def _skeletons(self, conn: Connection, view: GraphView, ids: Iterable[int]) -> None:
        for chunk in _chunks(ids, self.in_chunk):
            rows = conn.execute(_SKELETONS, {"ids": chunk})
            view.put_skeletons(_skeleton(r) for r in rows)
            view.put_absent(chunk)

    def _lists(self, conn: Connection, view: GraphView, ids: Iterable[int], by: Any,
               put: Any) -> None:
        """Children (in sibling order) or referrers (by id) as (owner, id) integer pairs."""
        packed = conn.dialect.name in ("mysql", "mariadb")
        for chunk in _chunks(ids, self.in_chunk):
            found, cut = _packed_lists(conn, chunk, by) if packed else ({}, chunk)
            if cut:
                found.update(_row_lists(conn, cut, by))
            for owner, members in found.items():
                put(owner, members)

    def _ancestors(self, conn: Connection, view: GraphView, ids: Iterable[int]) -> None:
        for chunk in _chunks(ids, self.in_chunk):
            view.put_skeletons(_skeleton(r) for r in conn.execute(_ANCESTORS, {"ids": chunk}))
            view.put_absent(chunk)

    def _rows(self, conn: Connection, view: GraphView, ids: Iterable[int]) -> None:
        for chunk in _chunks(ids, self.in_chunk):
            for r in conn.execute(_ROWS, {"ids": chunk}):
                view.put_row(_skeleton(r), _row(r))
            view.put_absent_rows(chunk)

    def load(self, view: GraphView, need: Need) -> None:
        """Load ``need`` into ``view`` on a connection of its own (outside a batch computation)."""
        try:
            with self.engine.connect() as conn:
                self._load(conn, view, need)
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"database error: {_reason(err)}") from err

    def subtree_and_referrers(self, roots: Iterable[int], *, limit: int = 10_000) -> set[int]:
        """Descendants of ``roots`` (deleted or not) and the link notes pointing into that subtree.

        Doughnut's soft delete stamps a note, its descendants and the link notes pointing at them,
        and a restore clears them again: every one of those notes changed. Bounded by ``limit``.
        """
        found = set(roots)
        frontier = set(found)
        try:
            with self.engine.connect() as conn:
                while frontier and len(found) < limit:
                    frontier = self._below(conn, frontier) - found
                    found |= frontier
                found |= self._referrers(conn, found)
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"database error: {_reason(err)}") from err
        return found

    def _below(self, conn: Connection, ids: Iterable[int]) -> set[int]:
        out: set[int] = set()
        for chunk in _chunks(ids, self.in_chunk):
            out.update(conn.execute(select(note.c.id).where(note.c.parent_id.in_(chunk))).scalars())
        return out

    def _referrers(self, conn: Connection, ids: Iterable[int]) -> set[int]:
        out: set[int] = set()
        for chunk in _chunks(ids, self.in_chunk):
            stmt = select(note.c.id).where(note.c.target_note_id.in_(chunk))
            out.update(conn.execute(stmt).scalars())
        return out

    # -- paging (rebuild --all) ---------------------------------------------------------------
    def live_ids_after(self, after_id: int, limit: int) -> list[int]:
        """The next ``limit`` live note ids above ``after_id``: keyset paging, no OFFSET."""
        stmt = (
            select(note.c.id)
            .where(note.c.id > after_id, note.c.deleted_at.is_(None))
            .order_by(note.c.id)
            .limit(limit)
        )
        try:
            with self.engine.connect() as conn:
                return list(conn.execute(stmt).scalars())
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"database error: {_reason(err)}") from err

    def ping(self) -> None:
        """Raise :class:`DatabaseUnavailable` unless the database answers a trivial query."""
        try:
            with self.engine.connect() as conn:
                conn.execute(select(literal(1)))
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"database unreachable: {_reason(err)}") from err

    def count_live(self) -> int:
        """How many live notes there are (for progress bars)."""
        try:
            with self.engine.connect() as conn:
                stmt = select(func.count()).select_from(note).where(note.c.deleted_at.is_(None))
                return int(conn.execute(stmt).scalar_one())
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"database error: {_reason(err)}") from err

    def any_note(self) -> bool:
        """Whether the table holds any row at all, deleted ones included."""
        try:
            with self.engine.connect() as conn:
                return conn.execute(select(note.c.id).limit(1)).first() is not None
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"database error: {_reason(err)}") from err

    # -- demo/test writes ---------------------------------------------------------------------
    def create_table(self) -> None:
        """Create a Doughnut-shaped ``note`` table if none exists (demos and tests only)."""
        try:
            metadata.create_all(self.engine, tables=[note])
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"cannot create the note table: {_reason(err)}") from err

    def insert(self, rows: Sequence[dict[str, Any]], *, chunk: int = 1000) -> None:
        try:
            with self.engine.begin() as conn:
                for start in range(0, len(rows), chunk):
                    conn.execute(note.insert(), list(rows[start : start + chunk]))
        except SQLAlchemyError as err:
            raise DatabaseUnavailable(f"cannot insert notes: {_reason(err)}") from err

    def drop_table(self) -> None:
        metadata.drop_all(self.engine, tables=[note])


def _row_lists(conn: Connection, owners: list[int], by: Any) -> dict[int, list[int]]:
    """One row per member: the portable form, and the fallback for an over-long packed list."""
    found: dict[int, list[int]] = {owner: [] for owner in owners}
    for owner, note_id in conn.execute(_ROW_LISTS[by.name], {"ids": owners}).tuples():
        found[owner].append(note_id)
    return found


def _packed_lists(
    conn: Connection, owners: list[int], by: Any
) -> tuple[dict[int, list[int]], list[int]]:
    """Every owner's members from one row per owner with a GROUP_CONCAT string (MySQL/MariaDB):
    the driver decodes a few strings instead of a row per member. Returns the lists and the
    owners whose list ``group_concat_max_len`` cut short (its length is not that of all the ids
    and separators: a cut inside the last id still shows), to read again."""
    found: dict[int, list[int]] = {owner: [] for owner in owners}
    cut: list[int] = []
    rows = conn.execute(_PACKED_LISTS[by.name], {"ids": owners}).tuples()
    for owner, count, digits, packed in rows:
        text = packed.decode() if isinstance(packed, bytes) else str(packed or "")
        if len(text) == int(digits) + count - 1:  # every id and separator arrived
            found[owner] = [int(i) for i in text.split(",")]
        else:
            del found[owner]
            cut.append(owner)
    return found, cut


def _row(r: Any) -> Row:
    return Row(
        id=r.id,
        title=r.topic_constructor,
        details=r.description,
        created_at_ms=epoch_ms(r.created_at),
        is_link=r.target_note_id is not None,
        parent=Ref(r.p_id, r.p_title) if r.p_id is not None else None,
        target=Ref(r.t_id, r.t_title) if r.t_id is not None else None,
    )


def _reason(err: SQLAlchemyError) -> str:
    """One line naming the cause, without the statement or parameters."""
    orig = getattr(err, "orig", None)
    return str(orig if orig is not None else err).splitlines()[0]
