"""Which foci an edit affects, and that rebuilding them leaves no old content anywhere (fast)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import pytest

from graphrag.core.errors import CacheUnavailable
from service import events, tree_events
from service.decoding import decode_envelope
from service.envelope import SnapshotKey
from service.events import sibling_radius
from service.note_event import NoteEvent
from service.tree_events import affected_foci
from storage.records import TreeNote
from tests.storage.graphs import hand_graph
from tests.usecases.conftest import SEEDS, CacheProxy, World


def live(world: World) -> list[int]:
    return world.source.live_ids_after(0, 10_000)


def shows(world: World, focus: int, text: str) -> bool:
    env = decode_envelope(world.cache.read(SnapshotKey(focus, "wavefront", SEEDS[0])))
    return env is not None and text in orjson.dumps(env.result).decode()


def test_an_edit_reaches_every_focus_that_shows_the_note(world: World) -> None:
    world.rebuild(live(world))
    showing = {f for f in live(world) if shows(world, f, '"Cat"')}
    assert len(showing) > 3
    world.edit(10, title="Kitty")
    affected = world.events(NoteEvent("note.updated", 10))
    assert showing <= affected
    assert world.dirty.size() == len(affected)
    taken = world.dirty.take(10_000)
    report = world.rebuild([i for i, _ in taken])
    assert report.errors == {}
    assert not [f for f in live(world) if shows(world, f, '"Cat"')]
    assert {f for f in live(world) if shows(world, f, '"Kitty"')} >= showing


def test_edited_notes_are_stamped_before_the_index_is_read(world: World) -> None:
    seq = world.cache.current_seq()
    world.events(NoteEvent("note.updated", 10))
    assert world.cache.touched_since([10, 11], seq) == {10}


def test_generations_of_every_affected_focus_move_on(world: World) -> None:
    world.rebuild(live(world))
    before = world.cache.generations(live(world))
    affected = world.events(NoteEvent("note.updated", 13))
    after = world.cache.generations(affected)
    assert all(after[f] > before.get(f, 0) for f in affected)


def test_a_move_affects_both_families(world: World) -> None:
    world.edit(21, parent_id=2)
    affected = world.events(NoteEvent("note.moved", 21, before_parent_id=3, after_parent_id=2))
    assert {3, 2, 21} <= affected
    assert {20, 22, 23} <= affected  # its old siblings, nearest first
    assert {16, 15} & affected  # and its new neighbours


def test_a_delete_changes_the_subtree_and_the_links_into_it(world: World) -> None:
    world.rebuild(live(world))
    edited, affected = affected_foci([NoteEvent("note.deleted", 2)], world.source, world.cache,
                                     sibling_radius=4)
    assert {2, 10, 11, 12, 30, 40, 41, 43, 44, 66} <= edited
    assert edited <= affected


def test_the_sibling_radius_is_the_widest_kept_strategys() -> None:
    assert sibling_radius(["wavefront"]) == 4
    assert sibling_radius(["wavefront", "relationship-bfs"]) == 31
    assert sibling_radius([]) == 0


def test_radius_covers_the_siblings_a_nearest_pick_can_reach(world: World) -> None:
    g = hand_graph()
    siblings = sorted((n for n in g.notes.values() if n.parent_id == 2 and not n.deleted),
                      key=lambda n: (n.skeleton().sibling_order, n.id))
    ids = [n.id for n in siblings]
    world.strategies = ("wavefront",)
    affected = world.events(NoteEvent("note.updated", ids[0]))
    assert set(ids[1:5]) <= affected


def test_an_edits_children_and_referring_links_are_urgent_unless_it_is_a_hub(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    world.rebuild(live(world))
    close = {n.id for n in world.source.notes.values()
             if (n.parent_id == 10 or n.target_note_id == 10) and n.deleted_at is None}
    assert len(close) >= 8
    radius = sibling_radius(world.strategies)
    urgent, affected = affected_foci([NoteEvent("note.updated", 10)], world.source, world.cache,
                                     sibling_radius=radius)
    assert close <= urgent <= affected
    monkeypatch.setattr(tree_events, "CLOSE_LIMIT", 3)  # note 10: more children and links than that
    urgent, hub_affected = affected_foci([NoteEvent("note.updated", 10)], world.source, world.cache,
                                         sibling_radius=radius)
    assert not close & urgent and hub_affected == affected  # the same work, only later


def test_an_edits_nearest_siblings_showing_it_are_urgent_unless_too_many(
    world: World, monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = hand_graph()
    ids = [n.id for n in sorted((n for n in g.notes.values() if n.parent_id == 2 and not n.deleted),
                                key=lambda n: (n.skeleton().sibling_order, n.id))]
    world.strategies = ("wavefront",)
    world.rebuild(live(world))
    shown = set(ids[1:5]) & world.cache.dependents([ids[0]])
    urgent, _ = affected_foci([NoteEvent("note.updated", ids[0])], world.source, world.cache,
                              sibling_radius=4)
    assert shown and shown <= urgent
    monkeypatch.setattr(tree_events, "CLOSE_LIMIT", 1)
    urgent, _ = affected_foci([NoteEvent("note.updated", ids[0])], world.source, world.cache,
                              sibling_radius=4)
    assert not shown & urgent


def test_a_small_edits_other_foci_wait_in_the_near_lane(world: World,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind its close foci, ahead of a large edit's wide set dirtied before it."""
    world.rebuild(live(world))
    urgent, affected = affected_foci([NoteEvent("note.updated", 10)], world.source, world.cache,
                                     sibling_radius=sibling_radius(world.strategies))
    assert urgent < affected
    for small, lane in ((len(affected) - 1, "wide"), (len(affected), "near")):
        monkeypatch.setattr(events, "SMALL_EDIT_FOCI", small)
        world.events(NoteEvent("note.updated", 10))
        assert {i for i, _ in world.dirty.take(10_000, lanes=("urgent",))} == urgent
        assert {i for i, _ in world.dirty.take(10_000, lanes=(lane,))} == affected - urgent
        world.dirty.done(world.dirty.take(10_000))


class _EditedBeforeTheWrite(CacheProxy):
    """An edit of ``note`` and its event land between a rebuild's computation and its write."""

    def __init__(self, world: World, note: int) -> None:
        super().__init__(world)
        self.note, self.done = note, False

    def write_many(self, envelopes: Any) -> list[bool]:
        if not self.done:
            self.done = True
            self.world.edit(self.note, title="Kitty")
            self.world.events(NoteEvent("note.updated", self.note))
        return self.world.cache.write_many(envelopes)


def test_a_write_refused_after_an_edit_is_put_back_but_not_outdated_again(world: World) -> None:
    """The event outdated the focus, so the refused write needs no bump of its own; it is put
    back all the same (the bump that refused it need not come with a rebuild: a webhook's
    outdating has none, tests/usecases/test_lost_rebuilds.py), and a drain shows the new title."""
    world.rebuild(live(world))
    racing = _EditedBeforeTheWrite(world, 10)
    report = world.rebuild([10], store=racing)  # type: ignore[arg-type]
    assert report.count == 0 and report.requeue == {10} and report.rejected > 0
    after_event = world.cache.generations([10])[10]
    assert world.dirty.size() > 0 and shows(world, 10, '"Cat"')  # outdated, queued, not yet redone
    world.rebuild([i for i, _ in world.dirty.take(10_000)])
    assert shows(world, 10, '"Kitty"') and world.cache.generations([10])[10] == after_event


class _CheckUnanswered(CacheProxy):
    """Redis stops answering after a batch's write, at its race check."""

    def touched_since(self, facts: Any, seq: int) -> set[Any]:
        raise CacheUnavailable("touched_since: connection reset")


def test_a_batch_whose_race_check_goes_unanswered_fails_with_what_it_wrote_outdated(
    world: World,
) -> None:
    """The batch is redone (its foci stay dirty, or its task retries); until then a snapshot it
    wrote, which may show what a racing edit changed, is not served as current."""
    with pytest.raises(CacheUnavailable):
        world.rebuild([10], store=_CheckUnanswered(world))  # type: ignore[arg-type]
    raw, counter = world.cache.read_current(SnapshotKey(10, "wavefront", SEEDS[0]))
    written = decode_envelope(raw)
    assert written is not None and written.generation < counter


def test_a_restore_reaches_the_link_notes_pointing_at_a_restored_link_note(world: World) -> None:
    """Link note 46 points at link note 41, which points into Cat's subtree: deleting Cat deletes 41
    with it (it points into the subtree) but not 46, whose snapshot, rebuilt meanwhile, shows no
    object and so no 41. The restore brings 41 back: neither 46 nor the snapshots showing 46 (its
    parent 12's) are in ``dep:{41}`` any more, yet 46's object is back, so the restore counts 46 as
    edited, found through the database (the referrers of the subtree's referrers)."""
    world.source.put(TreeNote(46, ":points at a link", parent_id=12, target_note_id=41))
    world.rebuild(live(world))
    gone = dt.datetime(2026, 1, 1)
    for note in (10, 30, 31, 32, 33, 40, 43, 41, 44):  # Cat's subtree and the links into it
        world.edit(note, deleted_at=gone)
    world.events(NoteEvent("note.deleted", 10))
    world.rebuild([i for i, _ in world.dirty.take(10_000)])
    world.dirty.done(world.dirty.take(10_000))
    assert not shows(world, 46, '"/n41"') and not shows(world, 12, '"/n41"')
    assert shows(world, 12, '"/n46"')
    for note in (10, 30, 31, 32, 33, 40, 43, 41, 44):
        world.edit(note, deleted_at=None)
    affected = world.events(NoteEvent("note.restored", 10))
    assert {46, 12} <= affected
    world.rebuild([i for i, _ in world.dirty.take(10_000)])
    assert shows(world, 46, '"/n41"') and shows(world, 12, '"/n41"')
