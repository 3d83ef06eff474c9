"""End to end: a worker SIGKILLed part-way through a drain loses no rebuild.

On a running system of its own (``tests/e2e/worker_system.py``: real MariaDB, real Redis,
``celery -A worker.celery.app worker``), once per broker (Redis, and RabbitMQ in a private vhost),
every note is edited at once and the worker is killed while a drain is part-way through the dirty set;
an edit arrives while no worker runs. A new worker drains everything the old one left: every snapshot is
rebuilt after the edit, none of a deleted note comes back, and an audit of all of them finds none
stale.
"""

from __future__ import annotations

import random
import time

import pytest

from service.audit import audit
from tests.e2e.conftest import FIGURES, wait_until
from tests.e2e.worker_system import System, _now_iso, quoted

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]


def test_sigkill_mid_batch_loses_no_rebuild(system: System) -> None:
    system.settle()
    live = system.live_ids()
    edited_at_ms = time.time_ns() // 1_000_000
    # every title changes, so every snapshot is stale until it is rebuilt
    system.sql("UPDATE note SET topic_constructor = CONCAT(topic_constructor, ' (rev 2)') "
               "WHERE deleted_at IS NULL")
    worker = system.workers.current
    pattern = r"graphrag\.process_events\[[^\]]+\] succeeded"
    done_before = worker.count(pattern)
    webhooks = [live[i : i + 100] for i in range(0, len(live), 100)]
    for ids in webhooks:
        system.send([{"type": "note.updated", "noteId": i, "occurredAt": _now_iso()} for i in ids])
    wait_until(lambda: worker.count(pattern) >= done_before + len(webhooks), timeout_s=30,
               what="every events task succeeds", details=worker.tail)
    peak = system.dirty.size()
    assert peak >= len(live) * 0.5, f"only {peak} of {len(live)} notes are dirty: drains are too fast"
    wait_until(lambda: system.drain_running() and 0 < system.dirty.size() < peak, timeout_s=30,
               what="a drain is part-way through the dirty set", details=worker.tail, interval_s=0.005)
    worker.kill()
    remaining = system.dirty.size()
    assert remaining > 0, "the drain finished before the kill: nothing was interrupted"
    rewritten = sum(env.computed_at_ms >= edited_at_ms for env in system.envelopes().values())
    FIGURES[f"SIGKILL, broker {system.broker}"] = (
        f"killed with {remaining} of {peak} dirty notes left, {rewritten} snapshots already rewritten")

    # an edit that arrives while no worker runs waits in the broker
    late = live[len(live) // 2]
    late_title = f"Title-late-{late}"
    system.sql("UPDATE note SET topic_constructor = :t WHERE id = :i", t=late_title, i=late)
    system.send([{"type": "note.updated", "noteId": late, "occurredAt": _now_iso()}])

    restarted = time.perf_counter()
    successor = system.workers.start()
    wait_until(system.quiet, timeout_s=120, what="the new worker drains everything the old one left",
               details=successor.tail, interval_s=0.1)
    FIGURES[f"recovery after SIGKILL, broker {system.broker}"] = (
        f"{time.perf_counter() - restarted:.1f} s from starting the new worker to an empty dirty set "
        "(includes waiting out the dead worker's drain leases)")

    envelopes = system.envelopes()
    expected = {k for note_id in live for k in system.variant_keys(note_id)}
    assert set(envelopes) == expected, "a snapshot is missing or one of a deleted note is back"
    stale = [k for k, env in envelopes.items() if env.computed_at_ms < edited_at_ms]
    assert not stale, f"{len(stale)} snapshots were not rebuilt after the edit, e.g. {stale[:3]}"
    assert all(quoted(late_title) in envelopes[k].encode() for k in system.variant_keys(late))
    started = time.perf_counter()
    report = audit(system.service, system.store, sample=len(envelopes) + 100,
                   now_ms=time.time_ns() // 1_000_000, rng=random.Random(0), worst=10)
    FIGURES[f"audit of every snapshot after recovery, broker {system.broker}"] = (
        f"{report.sampled} sampled, {report.stale} stale, {time.perf_counter() - started:.1f} s")
    assert report.sampled == len(envelopes)
    assert report.stale == 0, report.to_json()
