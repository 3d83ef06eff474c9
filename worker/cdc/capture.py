"""``graphrag cdc``: follow the database's binary log and enqueue the webhook's events.

Start-up checks first (storage.binlog.check_server: ``log_bin``, ``binlog_format=ROW``,
``binlog_row_image=FULL``, ``binlog_row_metadata=FULL`` on MariaDB, and the account's
``REPLICATION SLAVE``, ``REPLICATION CLIENT`` and ``SELECT``), each gap named on one line and nothing
started. Then the invariants:

* **One instance at a time.** A lease in Redis (``lock:cdc``, a few seconds' TTL, renewed from a
  thread). A second instance waits for it and takes over within one TTL of the first one's death;
  an instance that loses its lease stops reading before another could start.
* **Nothing committed is lost.** Each transaction's events are enqueued on the webhook's path (the
  ``graphrag.process_events`` task, with publisher confirms on RabbitMQ) and only then is the
  position after it stored (``<prefix>:cdc:position``, no TTL). After any crash the log is read again
  from the stored boundary: a transaction may be enqueued twice, which only marks foci dirty twice.
* **Reads are fresh at once.** Before a transaction's events are enqueued, every snapshot showing
  a note it changed is outdated (:func:`worker.enqueue.outdating`, Redis only), so the reader computes
  those instead of serving them, and no worker can take the event before that bump.
* **What row images cannot describe is rebuilt.** A DDL or TRUNCATE of a watched table, a
  statement-logged change, or a stored position the server has purged → a logged full rebuild
  (the nightly dispatcher), then it carries on from the server's current position.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from graphrag import GraphRagError
from service.cdc import WATCHED, events_of, touches_access
from service.events import outdate_shown
from service.metrics import CdcMetrics, edit_stages
from service.ports import Lease, PositionStore
from storage.binlog import (
    BinlogPosition,
    BinlogUnavailable,
    PositionPurged,
    SchemaChanged,
    Transaction,
    check_server,
    current_position,
    stream,
)
from storage.redis.positions import RedisAccessEpoch, RedisFeedHeartbeat, RedisPositions
from worker.cdc.lag import watched_lag
from worker.celery_app import create_celery
from worker.compose import Wiring
from worker.enqueue import celery_enqueuer, outdating
from worker.settings import Settings

__all__ = ["Capture", "run_cdc"]

log = logging.getLogger("graphrag.cdc")
_RECONNECT_S = 1.0


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Capture:
    """One following of the log: where to read, what to enqueue, where to keep the position."""

    url: str
    server_id: int
    model: str
    positions: PositionStore
    enqueue: Callable[[list[dict[str, Any]]], None]
    full_rebuild: Callable[[str], None]
    max_events: int
    stop: threading.Event
    metrics: CdcMetrics = field(default_factory=CdcMetrics.create)
    #: a transaction changed an access row: move the access epoch (service.access)
    on_access: Callable[[], None] = lambda: None
    #: the server sends the log from this position (each time the stream is opened)
    on_opened: Callable[[BinlogPosition], None] = lambda _at: None

    def start(self) -> BinlogPosition:
        stored = self.positions.get()
        if stored is not None:
            return BinlogPosition.from_text(stored)
        here = current_position(self.url)
        log.warning("no stored log position: starting at the server's current one (%s); snapshots "
                    "of earlier edits come from the nightly rebuild or `graphrag rebuild --all`",
                    here.to_text())
        self.positions.put(here.to_text())
        return here

    def follow(self) -> None:
        """Read until ``stop``; a purged position → full rebuild and on from the current one."""
        while not self.stop.is_set():
            try:
                tables, start = set(WATCHED[self.model]), self.start()
                for item in stream(self.url, server_id=self.server_id, watched_tables=tables,
                                   start=start, stop=self.stop, opened=partial(self.on_opened, start)):
                    self.apply(item)
            except PositionPurged as err:
                # the position first: what commits after it is read from the log, what committed
                # before it is committed before the full rebuild is queued, so that run reads it
                here = current_position(self.url)
                self.metrics.full_rebuilds.inc()
                self.full_rebuild(f"the stored log position is no longer on the server ({err})")
                self.positions.put(here.to_text())
            except BinlogUnavailable as err:
                log.warning("lost the log (%s); resuming from the stored position", err)
                self.stop.wait(_RECONNECT_S)

    def apply(self, item: Transaction | SchemaChanged) -> None:
        if isinstance(item, SchemaChanged):
            self.metrics.full_rebuilds.inc()
            self.full_rebuild(f"{item.statement_kind} on {', '.join(item.tables)}")
        else:
            events = events_of(item.changes, model=self.model, occurred_at=_now_iso())
            for start in range(0, len(events), self.max_events):
                self.enqueue(events[start:start + self.max_events])
            if touches_access(item.changes, model=self.model):
                self.on_access()
            self.metrics.events.inc(len(events))
        self.positions.put(item.position_after.to_text())
        self.metrics.transactions.inc()


def run_cdc(settings: Settings, stop: threading.Event, metrics_port: int | None = None) -> bool:
    """Check, take the lease, follow the log until ``stop``; False when the lease was lost. With
    ``metrics_port``, Prometheus metrics on ``http://0.0.0.0:<port>/metrics`` from the start (a
    standby instance answers scrapes too: a scrape that fails means no process, not a standby)."""
    if settings.cdc_database_url is not None:  # its own user (REPLICATION SLAVE, CLIENT)
        settings = settings.model_copy(update={"database_url": settings.cdc_database_url})
    registry = CollectorRegistry()
    metrics, stages = CdcMetrics.create(registry), edit_stages(registry)
    if metrics_port is not None:
        start_http_server(metrics_port, registry=registry)
    wiring = Wiring(settings)
    wiring.check_binding()
    model = wiring.source.model
    check_server(settings.database_url, watched_tables=WATCHED[model])
    lease = wiring.coordination.lock("cdc", ttl_ms=settings.cdc_lease_ms)
    if not _await(lease, stop, settings.cdc_lease_ms):
        return True
    celery = create_celery(settings)

    def full_rebuild(why: str) -> None:
        log.warning("full rebuild: %s", why)
        celery.send_task("graphrag.nightly_dispatch", queue="bulk")

    def opened(at: BinlogPosition) -> None:  # (once the server sends it: ready for the first edit)
        log.info("following the log of %s (%s profile) from %s",
                 settings.database_url.rsplit("@", 1)[-1], model, at.to_text())

    capture = Capture(settings.database_url, settings.cdc_server_id, model,
                      RedisPositions(wiring.client, wiring.keys),
                      outdating(celery_enqueuer(celery, stages),
                                lambda ids: outdate_shown(ids, wiring.cache), stages),
                      full_rebuild, settings.webhook_max_events, stop, metrics,
                      on_access=RedisAccessEpoch(wiring.client, wiring.keys).bump, on_opened=opened)
    server = partial(_server_position, settings.database_url)
    heartbeat = RedisFeedHeartbeat(wiring.client, wiring.keys)
    with _kept(lease, stop, every_s=settings.cdc_lease_ms / 3000) as lost:
        capture.start()  # stored before following: what is committed after it is read
        with watched_lag(capture.metrics, capture.positions, server, heartbeat):
            capture.follow()
    return not lost.is_set()


def _server_position(url: str) -> str:
    return current_position(url).to_text()


def _await(lease: Lease, stop: threading.Event, ttl_ms: int) -> bool:
    """Take the lease, waiting while another instance holds it; False if stopped first."""
    said = False
    while not lease.acquire():
        if not said:
            log.info("another instance follows the log; standing by")
            said = True
        if stop.wait(ttl_ms / 4000):
            return False
    return True


@contextlib.contextmanager
def _kept(lease: Lease, stop: threading.Event, *, every_s: float) -> Iterator[threading.Event]:
    """Renew the lease from a thread; on losing it, set ``stop`` (and the yielded event)."""
    lost, done = threading.Event(), threading.Event()

    def renewed() -> bool:
        try:
            return lease.renew()
        except GraphRagError as err:  # Redis unreachable: the lease may expire under us
            log.error("cannot renew the change-capture lease: %s", err)
            return False

    def renew() -> None:
        while not done.wait(every_s):
            if not renewed():
                log.error("lost the change-capture lease: stopping")
                lost.set()
                stop.set()
                return

    keeper = threading.Thread(target=renew, name="graphrag-cdc-lease", daemon=True)
    keeper.start()
    try:
        yield lost
    finally:
        done.set()
        keeper.join()
        if not lost.is_set():
            lease.release()
