"""Schema profiles: one module per table layout of Doughnut's database, behind one port.

A profile is the SQL of one layout and the graph model it yields (``service.ports.NoteSource``);
nothing outside its modules names a column. ``open_source(engine, "auto")`` picks the profile by
looking at the database: ``doughnut-2025`` when ``note.parent_id`` exists, ``doughnut-2026`` when
``note.folder_id`` and ``note_wiki_title_cache`` exist; otherwise it fails naming what each layout
lacks (docs/architecture.md, "Schema profiles"). Adding a layout is one module plus one entry in
:data:`PROFILES` (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import inspect
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from graphrag.core.errors import ConfigurationError, DatabaseUnavailable, SchemaMismatch
from service.ports import NoteSource
from storage.database import reason
from storage.profiles import doughnut_2025, doughnut_2026

__all__ = ["PROFILES", "SCHEMAS", "Profile", "detect", "open_source", "profile_named"]


@dataclass(frozen=True)
class Profile:
    """A table layout: its name, whether a database's tables look like it, how to read it."""

    name: str
    model: str
    matches: Callable[[dict[str, set[str]]], bool]
    open: Callable[[Engine, int], NoteSource]
    #: what the layout reads that a database lacks, named for an error
    missing: Callable[[dict[str, set[str]]], list[str]]
    #: the Doughnut releases whose database has this layout
    doughnut: str


PROFILES: tuple[Profile, ...] = (
    Profile(doughnut_2025.NAME, "tree",
            lambda tables: doughnut_2025.matches(tables.get("note", set())),
            lambda engine, chunk: doughnut_2025.Doughnut2025(engine, in_chunk=chunk),
            lambda tables: [f"note.{c}" for c in doughnut_2025.missing(tables.get("note", set()))],
            "Doughnut up to May 2026: the note tree, before and after December 2025's column "
            "renames"),
    Profile(doughnut_2026.NAME, "wiki", doughnut_2026.matches,
            lambda engine, chunk: doughnut_2026.Doughnut2026(engine, in_chunk=chunk),
            doughnut_2026.missing,
            "Doughnut since May 2026: folders and wiki links (checked against b2c0268c09)"),
)
#: Accepted values of ``GRAPHRAG_SCHEMA``.
SCHEMAS = ("auto", *(p.name for p in PROFILES))


def _tables(engine: Engine) -> dict[str, set[str]]:
    try:
        inspector = inspect(engine)
        return {t: {c["name"] for c in inspector.get_columns(t)} for t in inspector.get_table_names()}
    except SQLAlchemyError as err:
        raise DatabaseUnavailable(f"database unreachable: {reason(err)}") from err


def detect(engine: Engine) -> Profile:
    """The profile whose layout the database has; SchemaMismatch naming what is missing."""
    tables = _tables(engine)
    for profile in PROFILES:
        if profile.matches(tables):
            return profile
    if "note" not in tables:
        raise SchemaMismatch("table 'note' does not exist (run `graphrag db init`?)")
    lacks = "; ".join(f"as {p.name} it lacks {', '.join(p.missing(tables))}" for p in PROFILES)
    raise SchemaMismatch(f"the database matches no known Doughnut layout: {lacks}")


def profile_named(schema: str) -> Profile:
    """The profile called ``schema`` (ConfigurationError for another name)."""
    for profile in PROFILES:
        if profile.name == schema:
            return profile
    raise ConfigurationError(f"GRAPHRAG_SCHEMA: unknown schema {schema!r}; choose from "
                             f"{', '.join(SCHEMAS)}")


class _Detected:
    """A note source whose profile is detected on first use (so a process can start, and serve
    snapshots, while the database is down); every attribute forwards to the detected source."""

    def __init__(self, engine: Engine, in_chunk: int) -> None:
        self.engine, self._in_chunk = engine, in_chunk
        self._source: NoteSource | None = None

    def _resolve(self) -> NoteSource:
        if self._source is None:
            self._source = detect(self.engine).open(self.engine, self._in_chunk)
        return self._source

    def __getattr__(self, name: str) -> object:
        return getattr(self._resolve(), name)


def open_source(engine: Engine, schema: str = "auto", *, in_chunk: int = 100) -> NoteSource:
    """The note source of ``schema`` on ``engine``; ``auto`` detects the layout on first use."""
    if schema == "auto":
        return _Detected(engine, in_chunk)  # type: ignore[return-value]
    return profile_named(schema).open(engine, in_chunk)
