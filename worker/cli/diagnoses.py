"""The doctor's checks (worker.cli.doctor), one function each, each a :class:`Finding`.

A check reads and never writes: the binding is read, not bound; the grants are tried with
statements that read no row; the binary log's settings are asked as ``graphrag cdc`` asks them.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from service.cdc import WATCHED
from storage.binlog import CdcSetupError, check_server
from storage.database import open_engine
from storage.grants import reader_tables
from storage.profiles import profile_named
from storage.profiles.privileges import unreadable_tables
from storage.redis.server_facts import server_facts
from worker.compose import Wiring

__all__ = ["Finding", "auth", "binding", "change_source", "database", "grants", "redis",
           "sessions"]

@dataclass(frozen=True, slots=True)
class Finding:
    """One check: its name, whether it passes, what was found, and the fix when it fails."""

    check: str
    ok: bool
    found: str
    fix: str = ""

    def line(self) -> str:
        head = f"{'ok  ' if self.ok else 'FAIL'} {self.check}: {self.found}"
        return head if self.ok else f"{head}\n     fix: {self.fix}"


def database(wiring: Wiring) -> Finding:
    try:
        wiring.source.check()
        profile = profile_named(wiring.source.profile)
    except Exception as err:
        return Finding("database", False, str(err).splitlines()[0],
                       "check GRAPHRAG_DATABASE_URL and GRAPHRAG_SCHEMA")
    return Finding("database", True, f"{profile.name}: {profile.doughnut}")


def auth(wiring: Wiring) -> Finding:
    mode, model = wiring.settings.reader_auth, wiring.source.model
    if model == "wiki" and mode == "shared":
        return Finding("reader auth", False, "GRAPHRAG_READER_AUTH=shared on today's Doughnut: its "
                       "clients' own tokens and the web app's sessions get 401",
                       "set GRAPHRAG_READER_AUTH=both (the main app keeps the shared token)")
    if model == "tree" and mode != "shared":
        return Finding("reader auth", False, f"GRAPHRAG_READER_AUTH={mode} on the 2025 tree, which "
                       "has no users to read as", "set GRAPHRAG_READER_AUTH=shared")
    if mode != "shared" and wiring.settings.doughnut_url is None:
        return Finding("reader auth", True, f"GRAPHRAG_READER_AUTH={mode}; no GRAPHRAG_DOUGHNUT_URL: "
                       "the web app's cookie-only reads are answered by Doughnut (the proxy's "
                       "fallback), not from snapshots")
    return Finding("reader auth", True, f"GRAPHRAG_READER_AUTH={mode}")


def grants(wiring: Wiring) -> Finding:
    s = wiring.settings
    tables = reader_tables(wiring.source.profile, doughnut_users=s.reader_auth != "shared")
    engine = open_engine(s.database_url)
    try:
        missing = unreadable_tables(engine, tables)
    finally:
        engine.dispose()
    if missing:
        database_name = engine.url.database
        fix = " ".join(f"GRANT SELECT ON {database_name}.{t} TO <the reader's user>;" for t in missing)
        return Finding("grants", False, f"cannot read {', '.join(missing)}", fix)
    return Finding("grants", True, f"SELECT on {', '.join(tables)}")


def change_source(wiring: Wiring) -> Finding:
    s, model = wiring.settings, wiring.source.model
    chosen = s.change_source
    if chosen == "auto":
        chosen = "webhook" if s.webhook_secret is not None else "none"
        if model == "wiki":
            return Finding("change source", False, "GRAPHRAG_CHANGE_SOURCE=auto: today's Doughnut "
                           "sends no events, so nothing would follow its edits",
                           "run `graphrag cdc` and set GRAPHRAG_CHANGE_SOURCE=cdc (README, "
                           "\"Following Doughnut's edits\")")
    if chosen == "webhook":
        return _webhook(s.webhook_secret is not None)
    if chosen == "none":
        return Finding("change source", True, "none, explicitly: snapshots follow edits only at "
                       "the nightly rebuild and the soft TTL")
    return _capture(wiring)


def _webhook(secret: bool) -> Finding:
    if not secret:
        return Finding("change source", False, "webhooks without GRAPHRAG_WEBHOOK_SECRET",
                       "set GRAPHRAG_WEBHOOK_SECRET (whsec_<base64>), the sender's secret")
    return Finding("change source", True, "signed webhooks (a sender's lost events are not seen)")


def _capture(wiring: Wiring) -> Finding:
    s = wiring.settings
    url = s.cdc_database_url or s.database_url
    try:
        check_server(url, watched_tables=WATCHED[wiring.source.model])
    except CdcSetupError as err:
        return Finding("change source", False, f"change capture: {err}",
                       "see ops/runbook.md, \"Change capture\" (binary log settings and grants)")
    return Finding("change source", True, "change capture: the binary log and the account are "
                   "ready for `graphrag cdc`")


def redis(wiring: Wiring) -> Finding:
    facts = server_facts(wiring.client)
    if facts.version < (7, 0):
        return Finding("redis", False, f"Redis {facts.version_text}",
                       "use Redis 7.0 or later (snapshot writes publish on sharded channels)")
    if facts.policy != "volatile-lru":
        return Finding("redis", False, f"Redis {facts.version_text}, maxmemory-policy "
                       f"{facts.policy}", "set maxmemory-policy volatile-lru on the cache Redis "
                       "(every snapshot has a TTL; the binding and positions must never go)")
    return Finding("redis", True, f"Redis {facts.version_text}, volatile-lru")


def binding(wiring: Wiring) -> Finding:
    bound, mine = wiring.binding.bound(), wiring.source.identity()
    prefix = wiring.keys.prefix
    if bound is None:
        return Finding("key prefix", True, f"{prefix!r} is unbound; the first process binds it to "
                       f"this database, {mine}")
    if bound.digest != mine.digest:
        return Finding("key prefix", False, f"{prefix!r} holds the snapshots of {bound}, not of "
                       f"this database, {mine}", "give this deployment its own "
                       "GRAPHRAG_REDIS_PREFIX, or `graphrag prefix take-over`")
    return Finding("key prefix", True, f"{prefix!r} belongs to this database, {mine}")


def sessions(wiring: Wiring) -> Finding:
    url = f"{wiring.settings.doughnut_url}/api/user/current-user-info"
    try:
        answer = httpx.get(url, timeout=wiring.settings.doughnut_timeout_ms / 1000,
                           trust_env=False)
        ok = answer.status_code == 200 and answer.json().get("user", ...) is None
    except (httpx.HTTPError, ValueError, AttributeError) as err:
        return Finding("doughnut", False, f"{url} did not answer ({err.__class__.__name__})",
                       "set GRAPHRAG_DOUGHNUT_URL to Doughnut's backend as this host reaches it")
    if not ok:
        return Finding("doughnut", False, f"{url} is not Doughnut's current-user endpoint",
                       "set GRAPHRAG_DOUGHNUT_URL to Doughnut's backend (not the proxy)")
    return Finding("doughnut", True, f"{url} answers: web sessions can be asked about")
