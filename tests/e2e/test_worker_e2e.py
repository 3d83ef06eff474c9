"""End to end (issue 4): signed webhooks -> real Celery worker processes -> snapshots in real Redis,
computed from a real MariaDB (the notebooks and the system: ``tests/e2e/worker_system.py``).

The HTTP app (:func:`worker.http.server.build_http_app`) runs in-process under TestClient and enqueues
to the real broker; the worker is ``celery -A worker.celery.app worker``. Every test of the running
system runs twice, once per broker: Redis, and RabbitMQ in a private vhost.

Each edit (a title, a delete, a restore, a move, events for unknown notes) is made as Doughnut makes
it: the SQL change is committed, then the signed webhook is sent. The tests then poll Redis (bounded)
until every affected snapshot shows the change, and compare those snapshots with a live compute.
They share one system and run in order: the restore brings back what the delete removed.
"""

from __future__ import annotations

import time

import pytest

from graphrag import NoteNotFound
from service.decoding import decode_envelope
from tests.e2e.conftest import FIGURES, wait_until
from tests.e2e.worker_system import (
    FRESH_WITHIN_S,
    TOKEN,
    System,
    _now_iso,
    assert_renamed,
    edit_title,
    focus_of,
    mismatches,
    quoted,
    result_of,
    showing,
    title,
)
from tests.storage.graphs import all_uris
from worker.settings import load_settings

pytestmark = [pytest.mark.mariadb, pytest.mark.redis]


def test_an_explicit_broker_url_override_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)
    monkeypatch.delenv("GRAPHRAG_BROKER_URL", raising=False)
    assert load_settings(broker_url="memory://").broker_url == "memory://"


def test_the_full_rebuild_stored_every_variant_of_every_live_note(system: System) -> None:
    live = system.live_ids()
    keys = set(system.snapshot_keys())
    expected = {k for note_id in live for k in system.variant_keys(note_id)}
    assert keys == expected


def test_an_edited_title_reaches_every_snapshot_that_showed_it(system: System) -> None:
    system.settle()
    # note 10: a child of 2, parent of 40-42 (and so in their parentUriAndTitle), target of link 51
    latency = assert_renamed(system, 10, title(10), "Title-0010-renamed")
    assert latency < FRESH_WITHIN_S
    system.settle()
    served = system.http.get("/notes/40/graph", headers={"Authorization": f"Bearer {TOKEN}"})
    assert served.status_code == 200 and served.headers["X-Graphrag-Source"] == "cache"
    assert served.json()["focusNote"]["parentUriAndTitle"] == {"uri": "/n10",
                                                               "title": "Title-0010-renamed"}


def test_once_the_webhook_answered_no_read_serves_the_old_title(system: System) -> None:
    """The receiver outdates every snapshot showing the edited note before its 202
    (worker.enqueue.outdating) and the reader computes an outdated snapshot instead of serving it:
    reads right after the answer, before the worker has rebuilt anything, show the new title."""
    system.settle()
    old, new = title(33), "Title-0033-v2"  # 33: a child of 4, the parent of 67-72
    watched = sorted(showing(system.snapshots(), quoted(old)))
    assert len(watched) > 8, "note 33 should be shown by other notes' snapshots"
    edit_title(system, 33, new)
    for key in watched:
        strategy, seed, *limit = key.decode().split("}:", 1)[1].split(":")
        params = {"strategy": strategy, "seed": seed, "tokenLimit": limit[0] if limit else 5000}
        served = system.http.get(f"/notes/{focus_of(key)}/graph", params=params,
                                 headers={"Authorization": f"Bearer {TOKEN}"})
        assert served.status_code == 200, served.text
        assert quoted(new) in served.content and quoted(old) not in served.content, key
    system.settle()
    assert showing(system.snapshots(), quoted(old)) == set()
    assert mismatches(system, watched) == []


def test_a_deleted_note_disappears_from_every_snapshot_that_showed_it(system: System) -> None:
    system.settle()
    # note 11 with its children 43, 44 and link 58 under 44; link 54 points at 11: Doughnut stamps
    # all of them with one deleted_at
    gone = {11, 43, 44, 58, 54}
    before = system.snapshots()
    uris = {f"/n{i}" for i in gone}
    watched = {k for k, v in before.items()
               if focus_of(k) not in gone and uris & set(all_uris(result_of(v)))}
    assert len(watched) >= 4, "the notes to delete should be shown by other snapshots"
    system.sql("UPDATE note SET deleted_at = UTC_TIMESTAMP(3) "
               f"WHERE id IN ({', '.join(map(str, sorted(gone)))})")
    sent = time.perf_counter()
    system.send([{"type": "note.deleted", "noteId": 11, "occurredAt": _now_iso()}])
    own = [k for i in gone for k in system.variant_keys(i)]

    def gone_everywhere() -> bool:
        snaps = system.values(sorted(watched))
        if any(v is None or uris & set(all_uris(result_of(v))) for v in snaps.values()):
            return False
        return all(v is None for v in system.values(own).values())

    system.fresh_after(sent, gone_everywhere, "the deleted notes vanish from every snapshot")
    system.settle()
    after = system.snapshots()
    assert not [k for k, v in after.items() if uris & set(all_uris(result_of(v)))]
    assert not [k for k, v in after.items() for i in gone if quoted(title(i)) in v]
    assert set(watched) <= set(after), "a snapshot that showed a deleted note was dropped"
    assert mismatches(system, watched) == []
    for note_id in gone:
        assert system.store.dependents([note_id]) == set(), f"dep:{{{note_id}}} still lists foci"
        response = system.http.get(f"/notes/{note_id}/graph",
                                   headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 404, response.text
    reader = system.wiring.reader()
    with pytest.raises(NoteNotFound):
        reader.get(11)
    assert not any(system.values(own).values()), "a read of a deleted note wrote a snapshot back"


def test_a_restored_note_comes_back(system: System) -> None:
    system.settle()
    back = {11, 43, 44, 58, 54}  # what the delete test removed
    system.sql(f"UPDATE note SET deleted_at = NULL WHERE id IN ({', '.join(map(str, sorted(back)))})")
    sent = time.perf_counter()
    system.send([{"type": "note.restored", "noteId": 11, "occurredAt": _now_iso()}])
    own = [k for i in back for k in system.variant_keys(i)]
    system.fresh_after(sent, lambda: all(system.values(own).values()),
                       "every snapshot of the restored notes is back")
    system.settle()
    # exact for the restored notes and the notes they hang from or point at (2, 24, 25)
    near = [k for i in (*back, 2, 24, 25) for k in system.variant_keys(i)]
    assert mismatches(system, near) == []
    assert {11, 43, 44} <= system.store.dependents([11])  # itself, and its children's paths
    response = system.http.get("/notes/11/graph", headers={"Authorization": f"Bearer {TOKEN}"})
    if response.status_code != 200 or response.headers["X-Graphrag-Source"] != "cache":
        pytest.fail(f"not a hit: {dict(response.headers)}, dirty {system.dirty.size()}, "
                    f"generations {generations(system, 11)}")


def generations(system: System, note_id: int) -> dict[str, object]:
    """Each stored variant's generation (None: absent or undecodable) beside the note's counter:
    what decides whether a snapshot is outdated."""
    keys = system.variant_keys(note_id)
    out: dict[str, object] = {"counter": system.redis.get(system.store.keys.generation(note_id))}
    for key, raw in system.values(keys).items():
        found = None if raw is None else decode_envelope(raw)
        out[key.decode()] = None if found is None else found.generation
    return out


def test_a_moved_note_shows_under_its_new_parent(system: System) -> None:
    system.settle()
    # note 30 (with its child 47) leaves 4 for 15, a leaf: the strategies sample a parent's children,
    # so only a parent with few children is sure to show the newcomer in every variant
    moved, old_parent, new_parent, grandchild = 30, 4, 15, 47
    system.sql("UPDATE note SET parent_id = :p, sibling_order = 990 WHERE id = :i",
               p=new_parent, i=moved)
    sent = time.perf_counter()
    system.send([{"type": "note.moved", "noteId": moved, "occurredAt": _now_iso(),
                  "before": {"parentId": old_parent}, "after": {"parentId": new_parent}}])
    parent_keys = system.variant_keys(new_parent)
    moved_keys = system.variant_keys(moved) + system.variant_keys(grandchild)
    moved_uri, new_ref = f"/n{moved}", {"uri": f"/n{new_parent}", "title": title(new_parent)}

    def problems() -> list[str]:
        found = []
        for key, value in system.values(parent_keys).items():
            if value is None:
                found.append(f"{key!r} missing")
            elif moved_uri not in result_of(value)["focusNote"]["children"]:
                found.append(f"{key!r} lacks the child")
        for key, value in system.values(moved_keys).items():
            if value is None:
                found.append(f"{key!r} missing")
                continue
            focus = result_of(value)["focusNote"]
            path = focus["contextualPath"]
            if f"/n{new_parent}" not in path or f"/n{old_parent}" in path:
                found.append(f"{key!r} has the path {path}")
            if focus_of(key) == moved and focus.get("parentUriAndTitle") != new_ref:
                found.append(f"{key!r} has the parent {focus.get('parentUriAndTitle')}")
        return found

    def under_new_parent() -> bool:
        return not problems()

    system.fresh_after(sent, under_new_parent, f"note {moved} shows under note {new_parent}",
                       details=lambda: "\n".join(problems()))
    system.settle()
    snaps = system.snapshots()
    for key in parent_keys:
        related = result_of(snaps[key])["relatedNotes"]
        assert {"uri": moved_uri, "relationToFocusNote": "Child"}.items() <= next(
            n for n in related if n["uri"] == moved_uri).items()
    for key in system.variant_keys(old_parent):
        assert moved_uri not in result_of(snaps[key])["focusNote"]["children"]
    assert mismatches(system, [*parent_keys, *moved_keys, *system.variant_keys(old_parent)]) == []
    # no snapshot shows the moved note under the parent it left
    for key, value in snaps.items():
        for note in result_of(value)["relatedNotes"]:
            if note["uri"] == moved_uri:
                assert note.get("parentUriAndTitle") == new_ref, key


def test_events_for_unknown_notes_are_accepted_and_harmless(system: System) -> None:
    system.settle()
    before = system.snapshots()
    done = system.workers.current.count(r"graphrag\.drain\[[^\]]+\] succeeded")
    unknown = [987_654, 4_000_000_000]
    system.send([{"type": kind, "noteId": note_id, "occurredAt": _now_iso(),
                  "before": {"parentId": 555_555}}
                 for note_id in unknown for kind in ("note.updated", "note.deleted", "note.moved")])
    # recorded by the webhook before its answer: the unknown ids are dirty, and their drain queued
    wait_until(lambda: system.workers.current.count(
        r"graphrag\.drain\[[^\]]+\] succeeded") > done, timeout_s=FRESH_WITHIN_S,
        what="the events' drain succeeds", details=system.workers.current.tail)
    system.settle()
    assert system.snapshots() == before
    assert not any(system.values([k for i in unknown for k in system.variant_keys(i)]).values())
    assert "Traceback" not in system.workers.current.log()


def test_single_edit_latency(system: System) -> None:
    """Ten single title edits in a row; each must be fresh everywhere within FRESH_WITHIN_S."""
    latencies = []
    for note_id in (*range(60, 67), 20, 21, 22):
        system.settle()
        latencies.append(assert_renamed(system, note_id, title(note_id), f"Title-{note_id:04d}-v2"))
    FIGURES[f"single-edit latencies (ms), broker {system.broker}"] = ", ".join(
        f"{s * 1000:.0f}" for s in latencies)
    assert max(latencies) < FRESH_WITHIN_S
