"""The statements of the ``doughnut-2026`` profile: Doughnut 2026's wiki model, read in batches.

Each kind of need is one statement per chunk of ids (and, for the sampled lists, per seed and
viewer): note rows, folder chains (one recursive statement follows up to 64 parents), notebooks
with their owners, a note's link target ids in row-id order, the ids of the first n visible
referrers of each target and of the first n members of each folder (or notebook root) in Doughnut's
sampling order — one ``ROW_NUMBER() OVER (PARTITION BY ...)`` statement for a whole chunk of targets
or groups, so a batch of 100 foci costs a handful of statements per round, never one per focus. The
lists name notes by id; the loader reads the rows of those it lacks with :data:`NOTES`, once.

Sampling order is Doughnut's: ascending id, or with a seed ascending ``CRC32(CONCAT(id, seed))``,
ties by id. SQLite has no ``CRC32``; :func:`storage.database.prepare_engine` registers one that
computes zlib's CRC-32 of the same text.

The sampled and access statements are built once per *shape* (seeded or not, a user viewer or not)
and take the seed, the limit and the viewer as bound parameters: :func:`referrers` and friends
return the statement and its parameters. Building one per call cost ~5 ms (aliases copy every
column, with its foreign keys) and left SQLAlchemy objects in reference cycles for the collector.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import String, and_, bindparam, cast, exists, func, literal, or_, select, true
from sqlalchemy.sql import Select

from storage.profiles.tables_2026 import (
    bazaar_notebook,
    circle_user,
    folder,
    note,
    note_wiki_title_cache,
    notebook,
    ownership,
    subscription,
)

__all__ = [
    "FOLDER_CHAINS",
    "LINKS",
    "NOTEBOOKS",
    "NOTES",
    "Sampled",
    "access",
    "folder_peers",
    "note_columns",
    "referrers",
    "root_peers",
]

_IDS: Any = bindparam("ids", expanding=True)
_FOLDER_HOPS = 64
#: A statement and the parameters it takes besides ``ids``.
Sampled = tuple[Select[Any], dict[str, Any]]


def note_columns(n: Any) -> list[Any]:
    """The columns of a note row the wiki view holds, labelled for :func:`_note` readers."""
    return [n.c.id.label("n_id"), n.c.notebook_id.label("n_notebook"),
            n.c.folder_id.label("n_folder"), n.c.title.label("n_title"),
            n.c.content.label("n_content"), n.c.created_at.label("n_created"),
            n.c.deleted_at.is_not(None).label("n_deleted")]


NOTES = select(*note_columns(note)).where(note.c.id.in_(_IDS))

NOTEBOOKS = (
    select(notebook.c.id, notebook.c.name, ownership.c.user_id, ownership.c.circle_id)
    .outerjoin(ownership, ownership.c.id == notebook.c.ownership_id)
    .where(notebook.c.id.in_(_IDS))
)


def _folder_chains() -> Select[Any]:
    seed = (select(folder.c.id, folder.c.parent_folder_id, literal(0).label("hops"))
            .where(folder.c.id.in_(_IDS)).cte("chain", recursive=True))
    up = folder.alias("up")
    chain = seed.union_all(
        select(up.c.id, up.c.parent_folder_id, seed.c.hops + 1)
        .where(up.c.id == seed.c.parent_folder_id, seed.c.hops < _FOLDER_HOPS))
    return select(folder.c.id, folder.c.notebook_id, folder.c.parent_folder_id, folder.c.name).where(
        folder.c.id.in_(select(chain.c.id).distinct().scalar_subquery()))


FOLDER_CHAINS = _folder_chains()


def _links() -> Select[Any]:
    c = note_wiki_title_cache
    return (select(c.c.note_id, c.c.target_note_id)
            .where(c.c.note_id.in_(_IDS)).order_by(c.c.note_id, c.c.id))


LINKS = _links()


def _order_key(id_column: Any, seeded: bool) -> list[Any]:
    """Doughnut's sampling order on ``id_column`` (seeded: by the CRC-32 of id and ``seed``)."""
    if not seeded:
        return [id_column]
    text = cast(id_column, String).concat(bindparam("seed", type_=String))
    return [func.crc32(text), id_column]


def _ranked(rows: Select[Any], partition: Any, id_column: Any, seeded: bool) -> Any:
    rank = func.row_number().over(partition_by=partition, order_by=_order_key(id_column, seeded))
    return rows.add_columns(rank.label("rn")).subquery("ranked")


def _sample(ranked: Any) -> Select[Any]:
    """The sampled ids, by owner in sampling order. The ranking runs on ids only: a window
    function's temporary table then holds narrow integer rows, never the notes' TEXT columns (which
    would push it to disk and, on MariaDB 10.11, could crash the server while freeing it); the rows
    of sampled notes the view lacks are read by :data:`NOTES` after it."""
    return (select(ranked.c.owner, ranked.c.n_id, ranked.c.rn)
            .where(ranked.c.rn <= bindparam("limit")).order_by(ranked.c.owner, ranked.c.rn))


def _params(seed: int | None, limit: int, **viewer: int | None) -> dict[str, Any]:
    bound: dict[str, Any] = {"limit": limit, **{k: v for k, v in viewer.items() if v is not None}}
    return bound if seed is None else bound | {"seed": str(seed)}


def _visible(r: Any, t: Any, by_user: bool) -> Any:
    """Doughnut's inbound visibility: the target's notebook, or the viewer owns the referrer's
    notebook through ``ownership.user_id``, or subscribes to it (circles and the bazaar do not count)."""
    same = r.c.notebook_id == t.c.notebook_id
    if not by_user:
        return same
    owned = exists().where(notebook.c.id == r.c.notebook_id, ownership.c.id == notebook.c.ownership_id,
                           ownership.c.user_id == bindparam("user"))
    subscribed = exists().where(subscription.c.notebook_id == r.c.notebook_id,
                                subscription.c.user_id == bindparam("user"))
    return or_(same, owned, subscribed)


def referrers(seed: int | None, viewer_user: int | None, limit: int) -> Sampled:
    """The first ``limit`` distinct, live, visible referrers of each target in ``ids`` (rows with
    an ``owner`` column = the target), in sampling order; a circle viewer passes ``viewer_user``
    None (only the target's own notebook is visible to it)."""
    return (_referrers(seed is not None, viewer_user is not None),
            _params(seed, limit, user=viewer_user))


@cache
def _referrers(seeded: bool, by_user: bool) -> Select[Any]:
    c = note_wiki_title_cache
    pairs = (select(c.c.target_note_id.label("t_id"), c.c.note_id.label("r_id"))
             .where(c.c.target_note_id.in_(_IDS)).distinct().subquery("pairs"))
    r, t = note.alias("r"), note.alias("tn")
    rows = (select(pairs.c.t_id.label("owner"), r.c.id.label("n_id"))
            .join(r, r.c.id == pairs.c.r_id).outerjoin(t, t.c.id == pairs.c.t_id)
            .where(r.c.deleted_at.is_(None), r.c.notebook_id.is_not(None),
                   _visible(r, t, by_user)))
    return _sample(_ranked(rows, pairs.c.t_id, r.c.id, seeded))


def folder_peers(seed: int | None, limit: int) -> Sampled:
    """The first ``limit`` live direct members of each folder in ``ids`` (any notebook)."""
    return _folder_peers(seed is not None), _params(seed, limit)


@cache
def _folder_peers(seeded: bool) -> Select[Any]:
    rows = (select(note.c.folder_id.label("owner"), note.c.id.label("n_id"))
            .where(note.c.folder_id.in_(_IDS), note.c.deleted_at.is_(None)))
    return _sample(_ranked(rows, note.c.folder_id, note.c.id, seeded))


def root_peers(seed: int | None, limit: int) -> Sampled:
    """The first ``limit`` live notes at the root (no folder) of each notebook in ``ids``."""
    return _root_peers(seed is not None), _params(seed, limit)


@cache
def _root_peers(seeded: bool) -> Select[Any]:
    rows = (select(note.c.notebook_id.label("owner"), note.c.id.label("n_id"))
            .where(note.c.notebook_id.in_(_IDS), note.c.folder_id.is_(None),
                   note.c.deleted_at.is_(None)))
    return _sample(_ranked(rows, note.c.notebook_id, note.c.id, seeded))


def access(viewer_user: int | None, viewer_circle: int | None) -> Sampled:
    """Per notebook in ``ids``: its owner and the viewer's subscription, bazaar and circle facts."""
    if viewer_user is not None:
        return _access(True), {"user": viewer_user}
    return _access(False), {"circle": viewer_circle}


@cache
def _access(by_user: bool) -> Select[Any]:
    o = ownership
    subscribed = (exists().where(subscription.c.notebook_id == notebook.c.id,
                                 subscription.c.user_id == bindparam("user"))
                  if by_user else literal(False))
    member = (exists().where(circle_user.c.circle_id == o.c.circle_id,
                             circle_user.c.user_id == bindparam("user"))
              if by_user else o.c.circle_id == bindparam("circle"))
    bazaar = exists().where(bazaar_notebook.c.notebook_id == notebook.c.id)
    return (select(notebook.c.id, o.c.user_id, o.c.circle_id, subscribed.label("subscribed"),
                   and_(o.c.circle_id.is_not(None), member).label("member"), bazaar.label("bazaar"))
            .outerjoin(o, o.c.id == notebook.c.ownership_id).where(notebook.c.id.in_(_IDS), true()))

