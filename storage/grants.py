"""The database privileges the service needs, per table layout and per way of running it.

This is the one list; the SQL that README.md ("Deploying beside Doughnut") and ops/runbook.md show is
rendered from it (ops.grants_doc, ``make docs``) and tests/test_grants_doc.py runs that SQL on MariaDB.

* **Reading** (``serve``, ``worker``, ``mcp``, ``rebuild``, ``audit``): ``SELECT`` on the tables of
  the layout's profile: ``doughnut-2025`` its ``note`` table, ``doughnut-2026`` every table of
  :data:`storage.profiles.tables_2026.REQUIRED`.
* **Doughnut's users** (``GRAPHRAG_READER_AUTH=doughnut|both``, today's Doughnut only): ``user_token``
  besides.
* **Change capture** (``graphrag cdc``): ``REPLICATION SLAVE`` and ``REPLICATION CLIENT`` to read the
  binary log, and ``SELECT`` on the layout's tables (it detects the layout and checks the cache's
  binding like every process) and on every table it watches (:data:`service.cdc.WATCHED`, which
  ``check_server`` probes).
"""

from __future__ import annotations

from collections.abc import Iterable

from service.cdc import WATCHED
from storage.profiles import PROFILES, tables_2026
from storage.profiles.tables_2025 import note_table

__all__ = ["LAYOUTS", "REPLICATION", "capture_sql", "capture_tables", "reader_sql", "reader_tables"]

#: Privileges on ``*.*`` that reading the binary log needs (storage.binlog.setup checks them).
REPLICATION = ("REPLICATION SLAVE", "REPLICATION CLIENT")

_LAYOUT_TABLES: dict[str, tuple[str, ...]] = {
    "doughnut-2026": tuple(tables_2026.REQUIRED),
    "doughnut-2025": (note_table().name,),
}
_USERS_TABLES: dict[str, tuple[str, ...]] = {
    "doughnut-2026": (tables_2026.user_token.name,),
    "doughnut-2025": (),  # GRAPHRAG_READER_AUTH=doughnut|both needs today's Doughnut
}
#: The layouts, today's Doughnut first.
LAYOUTS = tuple(_LAYOUT_TABLES)
_MODELS = {profile.name: profile.model for profile in PROFILES}


def reader_tables(layout: str, *, doughnut_users: bool = False) -> tuple[str, ...]:
    """The tables every process reads on ``layout``; with ``doughnut_users``, the token table too."""
    return _LAYOUT_TABLES[layout] + (_USERS_TABLES[layout] if doughnut_users else ())


def users_tables(layout: str) -> tuple[str, ...]:
    """What ``GRAPHRAG_READER_AUTH=doughnut|both`` reads besides (none on the 2025 tree)."""
    return _USERS_TABLES[layout]


def capture_tables(layout: str) -> tuple[str, ...]:
    """The tables change capture selects on ``layout``: the layout's, then the other watched ones."""
    own = reader_tables(layout)
    return own + tuple(sorted(WATCHED[_MODELS[layout]] - set(own)))


def _selects(tables: Iterable[str], database: str, account: str) -> list[str]:
    return [f"GRANT SELECT ON {database}.{table} TO {account};" for table in tables]


def _create(account: str, password: str) -> str:
    return f"CREATE USER {account} IDENTIFIED BY '{password}';"


def reader_sql(layout: str, *, database: str = "doughnut", account: str = "'graphrag'@'%'",
               password: str = "<long random password>") -> list[str]:
    """The statements that make the reading user of ``layout``; a ``--`` line before the grants that
    only Doughnut's users need."""
    lines = [_create(account, password), *_selects(reader_tables(layout), database, account)]
    users = users_tables(layout)
    if users:
        lines += ["-- GRAPHRAG_READER_AUTH=doughnut|both: Doughnut's access tokens",
                  *_selects(users, database, account)]
    return lines


def capture_sql(layout: str, *, database: str = "doughnut", account: str = "'graphrag_cdc'@'%'",
                password: str = "<long random password>") -> list[str]:
    """The statements that make change capture's user on ``layout``."""
    return [_create(account, password), f"GRANT {', '.join(REPLICATION)} ON *.* TO {account};",
            *_selects(capture_tables(layout), database, account)]
