"""``graphrag doctor``: whether this deployment will work, checked before anything runs.

Run with the real settings (the same environment as the processes), it checks each thing a first
deployment gets wrong and prints one line per check, ``ok`` or ``FAIL`` and, for a failure, the fix:

* the database: reachable, its layout and the Doughnut releases it matches;
* the grants the chosen mode needs: the reader's tables (and ``user_token`` for Doughnut's users);
* the change source (``GRAPHRAG_CHANGE_SOURCE``): for change capture, the binary log's settings and
  its user's privileges (what ``graphrag cdc`` checks when it starts); for webhooks, the secret;
  today's Doughnut sends no events, so ``auto`` there has no source;
* Redis: its version (7.0 or later), its eviction policy (``volatile-lru``) and ``maxmemory``
  against the site's measured size (live notes × snapshots per note × bytes per snapshot,
  service.capacity);
* the key prefix's binding (service.binding): this database's, or unbound, never another's;
* the reader's auth mode against the layout (Doughnut's users need ``doughnut`` or ``both`` on
  today's Doughnut), and Doughnut's address for the web app's sessions when one is set.

It exits 0 only when every check passes; it changes nothing (no binding, no tables).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from graphrag.core.errors import GraphRagError
from service.capacity import needed_bytes, snapshots_per_note
from worker.cli import diagnoses as d
from worker.cli.diagnoses import Finding
from worker.compose import Wiring
from worker.settings import Settings

__all__ = ["diagnose", "report"]

_MIB = 2**20


def report(settings: Settings) -> tuple[list[str], bool]:
    """The doctor's lines and whether every check passed."""
    findings = diagnose(settings)
    return [f.line() for f in findings], all(f.ok for f in findings)


def diagnose(settings: Settings) -> list[Finding]:
    wiring = Wiring(settings)
    try:
        return list(_checks(wiring))
    finally:
        wiring.close()


def _checks(wiring: Wiring) -> Iterator[Finding]:
    database = d.database(wiring)
    yield database
    checks: tuple[Callable[[Wiring], Finding], ...] = (d.auth, d.grants, d.change_source)
    if database.ok:
        yield from (_safely(check, wiring) for check in checks)
    yield _safely(d.redis, wiring)
    if database.ok:
        yield _safely(_memory, wiring)
        yield _safely(d.binding, wiring)
    if wiring.settings.doughnut_url is not None:
        yield _safely(d.sessions, wiring)


def _safely(check: Callable[[Wiring], Finding], wiring: Wiring) -> Finding:
    """A check that meets an error the service names fails with it, never with a traceback."""
    try:
        return check(wiring)
    except GraphRagError as err:
        return Finding(check.__name__.strip("_"), False, str(err), "see the line above")


def _memory(wiring: Wiring) -> Finding:
    from storage.redis.server_facts import server_facts

    s, model = wiring.settings, wiring.source.model
    notes = wiring.source.count_live()
    needed = needed_bytes(notes, model, snapshots_per_note(wiring.strategies(), s.seeds,
                                                           s.layered_limits))
    limit = server_facts(wiring.client).max_bytes
    found = (f"{notes} live notes need about {needed // _MIB} MiB; maxmemory is "
             f"{limit // _MIB if limit else 'unlimited'}" + (" MiB" if limit else ""))
    if limit and limit < needed:
        return Finding("redis memory", False, found,
                       f"raise the cache Redis's maxmemory to at least {needed // _MIB}mb "
                       "(docs/capacity.md): evicted snapshots are computed live on the database")
    return Finding("redis memory", True, found)
