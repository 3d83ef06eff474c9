"""Doughnut 2025's ``note`` table (the tree model) and every statement the service runs on it.

Doughnut renamed two columns during 2025-2026 (docs/architecture.md, "Schema profiles"): the title is
whichever of ``topic_constructor``, ``title_constructor``, ``title`` exists, the details whichever of
``description``, ``details``, ``content``. :func:`note_table` builds the table object for the names
found, and :class:`TreeStatements` builds every statement from it once (SQLAlchemy caches their
compiled form; only the expanding ``ids`` parameter varies). This module and its profile are the
only places that name a column of this layout.
"""

from __future__ import annotations

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
    func,
    literal,
    literal_column,
    select,
)
from sqlalchemy.dialects import mysql

__all__ = [
    "DETAILS_COLUMNS",
    "SKELETON_WIDTH",
    "TITLE_COLUMNS",
    "TreeStatements",
    "note_table",
]

TITLE_COLUMNS = ("topic_constructor", "title_constructor", "title")
DETAILS_COLUMNS = ("description", "details", "content")
#: Columns read besides the title and details columns.
FIXED_COLUMNS = ("id", "parent_id", "target_note_id", "sibling_order", "created_at", "deleted_at")

_UINT = Integer().with_variant(mysql.INTEGER(unsigned=True), "mysql", "mariadb")
_TS = DateTime().with_variant(mysql.TIMESTAMP(), "mysql", "mariadb")
_TS3 = DateTime().with_variant(mysql.TIMESTAMP(fsp=3), "mysql", "mariadb")
_ANCESTOR_ROUND = 64  # parent hops one recursive statement follows; longer chains take more rounds


def note_table(title: str = TITLE_COLUMNS[0], details: str = DETAILS_COLUMNS[0],
               metadata: MetaData | None = None) -> Table:
    """Doughnut's ``note`` table with the given title/details column names (columns the service
    reads, plus the ones demos fill)."""
    return Table(
        "note",
        metadata or MetaData(),
        Column("id", _UINT, primary_key=True, autoincrement=True),
        Column("parent_id", _UINT, nullable=True),
        Column("target_note_id", _UINT, nullable=True),
        Column("sibling_order", BigInteger, nullable=False, server_default="1"),
        Column(title, String(150), nullable=False, key="title"),
        Column(details, Text, nullable=True, key="details"),
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


_IDS: Any = bindparam("ids", expanding=True)
#: The number of columns :meth:`TreeStatements._skeleton_cols` gives, first in every statement that
#: returns skeletons (``rows`` adds title, details, created_at and the parent's and target's id and
#: title after them): the reader unpacks rows by position.
SKELETON_WIDTH = 5


class TreeStatements:
    """Every read statement on one ``note`` table, built once."""

    def __init__(self, note: Table) -> None:
        self.note = note
        c = note.c
        self.skeletons = select(*self._skeleton_cols(note)).where(c.id.in_(_IDS))
        self.rows = self._rows()
        self.ancestors = self._ancestors()
        self.row_lists = {key: self._row_list(by) for key, by in self._owners()}
        self.packed_lists = {key: self._packed_list(by) for key, by in self._owners()}
        self.below = select(c.id).where(c.parent_id.in_(_IDS))
        self.referrers = select(c.id).where(c.target_note_id.in_(_IDS))
        self.count_live = select(func.count()).select_from(note).where(c.deleted_at.is_(None))
        self.any_note = select(c.id).limit(1)

    def _owners(self) -> tuple[tuple[str, Any], ...]:
        return (("children", self.note.c.parent_id), ("inbound", self.note.c.target_note_id))

    @staticmethod
    def _skeleton_cols(t: Any) -> list[Any]:
        return [t.c.id, t.c.parent_id, t.c.target_note_id, t.c.sibling_order,
                t.c.deleted_at.is_not(None).label("deleted")]

    def _rows(self) -> Any:
        n, p, t = self.note.alias("n"), self.note.alias("p"), self.note.alias("t")
        return (
            select(
                *self._skeleton_cols(n), n.c.title.label("title"), n.c.details.label("details"),
                n.c.created_at,
                p.c.id.label("p_id"), p.c.title.label("p_title"),
                t.c.id.label("t_id"), t.c.title.label("t_title"),
            )
            .outerjoin(p, (p.c.id == n.c.parent_id) & p.c.deleted_at.is_(None))
            .outerjoin(t, (t.c.id == n.c.target_note_id) & t.c.deleted_at.is_(None))
            .where(n.c.id.in_(_IDS))
        )

    def _ancestors(self) -> Any:
        note = self.note
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
        return select(*self._skeleton_cols(note)).where(note.c.id.in_(ids_in_chain))

    def _order(self, by: Any) -> tuple[Any, ...]:
        c = self.note.c
        return (c.sibling_order, c.id) if by is c.parent_id else (c.id,)

    def _row_list(self, by: Any) -> Any:
        c = self.note.c
        return (select(by, c.id).where(by.in_(_IDS), c.deleted_at.is_(None))
                .order_by(by, *self._order(by)))

    def _packed_list(self, by: Any) -> Any:
        c = self.note.c
        order = ", ".join(f"note.{col.name}" for col in self._order(by))
        members: Any = literal_column(f"GROUP_CONCAT(note.id ORDER BY {order} SEPARATOR ',')")
        digits = func.sum(func.length(c.id))
        return (select(by, func.count(), digits, members)
                .where(by.in_(_IDS), c.deleted_at.is_(None)).group_by(by))

    def live_ids_after(self, after_id: int, limit: int) -> Any:
        c = self.note.c
        return (select(c.id).where(c.id > after_id, c.deleted_at.is_(None))
                .order_by(c.id).limit(limit))
