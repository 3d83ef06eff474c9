"""A restore resolved after the tree moved on still reaches every note it brought back.

A restore event names its root only; the event task finds what came back by walking the tree from
that root, when it runs. Seen as missing snapshots after the SIGKILL suites (the event waited for a
worker): a note created and deleted before any drain reached it had no snapshot and so no entry in
any reverse index; its subtree was restored, then an ancestor of it (or the target of a link
pointing into the subtree) moved out of the restored subtree before the restore's event ran. The
walk from the root no longer found it, and the move's own event named the moved note, its
neighbours and the foci whose snapshots show it, none of which was the note: nothing ever built
it again. The same order left the snapshots that show a link to a restored link (without its
object) as they were. Each test commits the restore and the move, then runs their event tasks one
after the other in both orders, drains, and compares every snapshot with a rebuild from scratch.
"""

from __future__ import annotations

import datetime as dt

import pytest

from service.envelope import SnapshotKey
from service.note_event import NoteEvent
from storage.records import TreeNote
from tests.usecases.conftest import SEEDS, World, current, drain_all, stale_snapshots

DELETED_AT = dt.datetime(2026, 1, 1)
NEW = 900  # created under Cat's second child (a leaf), deleted with Cat before any drain reached it
LINK = 901  # in notebook B, pointing into Cat's subtree: deleted with it
LINK_TO_LINK = 902  # in notebook B, pointing at LINK: not deleted, but its object goes and comes back
RESTORE = NoteEvent("note.restored", 10)
ORDERS = pytest.mark.parametrize("restore_first", [True, False],
                                 ids=["restore-task-first", "move-task-first"])


def _set_deleted(world: World, ids: set[int], deleted_at: dt.datetime | None) -> None:
    for note_id in ids:
        world.edit(note_id, deleted_at=deleted_at)


def _cat_deleted_then_restored(world: World) -> set[int]:
    """Build everything, add the new notes (their events recorded, never drained), delete Cat's
    subtree as Doughnut stamps it and drain; then restore it in the database (no event yet).
    Returns the restored ids."""
    world.rebuild(sorted(i for i, n in world.source.notes.items() if n.deleted_at is None))
    world.source.put(TreeNote(LINK, ":points into Cat", parent_id=61, target_note_id=32))
    world.source.put(TreeNote(LINK_TO_LINK, ":points at the link", parent_id=62,
                              target_note_id=LINK))
    world.events(NoteEvent("note.created", LINK), NoteEvent("note.created", LINK_TO_LINK))
    drain_all(world)
    world.source.put(TreeNote(NEW, "Born and buried", parent_id=31))
    world.events(NoteEvent("note.created", NEW))
    stamped = {i for i in world.source.edit_scope([10]) if i != LINK_TO_LINK
               and world.source.notes[i].deleted_at is None}
    _set_deleted(world, stamped, DELETED_AT)
    world.events(NoteEvent("note.deleted", 10))
    drain_all(world)
    assert world.cache.read(SnapshotKey(NEW, "wavefront", SEEDS[0])) is None
    assert b"objectUriAndTitle" not in current(world, LINK_TO_LINK).result_json
    _set_deleted(world, stamped, None)
    return stamped


def _event_tasks(world: World, later: NoteEvent, *, restore_first: bool) -> None:
    """The restore's event task and ``later``'s, each on its own, in the order given; then drain."""
    for event in ((RESTORE, later) if restore_first else (later, RESTORE)):
        world.events(event)
    drain_all(world)


@ORDERS
def test_a_restored_note_whose_ancestor_moved_out_before_the_restore_ran_is_built(
        world: World, restore_first: bool) -> None:
    restored = _cat_deleted_then_restored(world)
    assert {31, NEW} <= restored
    world.edit(31, parent_id=3)  # the new note's parent moves to Plants
    _event_tasks(world, NoteEvent("note.moved", 31, before_parent_id=10, after_parent_id=3),
                 restore_first=restore_first)
    assert b"Plants" in current(world, NEW).result_json  # its contextualPath after the move
    assert stale_snapshots(world) == []


@ORDERS
def test_a_link_to_a_restored_link_that_was_relinked_before_the_restore_ran_shows_its_object(
        world: World, restore_first: bool) -> None:
    _cat_deleted_then_restored(world)
    world.edit(LINK, target_note_id=63)  # the restored link now points out of Cat's subtree
    _event_tasks(world, NoteEvent("note.updated", LINK, before_target_id=32, after_target_id=63),
                 restore_first=restore_first)
    assert f'"/n{LINK}"'.encode() in current(world, LINK_TO_LINK).result_json
    assert stale_snapshots(world) == []  # its parent and the notes showing it too


@ORDERS
def test_a_link_whose_target_moved_out_before_the_restore_ran_is_rebuilt(
        world: World, restore_first: bool) -> None:
    """The link's target (32) leaves Cat's subtree; the link, restored with it, is found through
    the moved note, and so is the link pointing at the link."""
    _cat_deleted_then_restored(world)
    world.edit(32, parent_id=4)
    _event_tasks(world, NoteEvent("note.moved", 32, before_parent_id=10, after_parent_id=4),
                 restore_first=restore_first)
    assert current(world, LINK).note_id == LINK
    assert f'"/n{LINK}"'.encode() in current(world, LINK_TO_LINK).result_json
    assert stale_snapshots(world) == []


def test_the_restore_on_time_leaves_nothing_stale(world: World) -> None:
    """The reference the replays are held to: the same commits with the restore's event task
    run before the move is committed."""
    _cat_deleted_then_restored(world)
    world.events(RESTORE)
    world.edit(31, parent_id=3)
    world.events(NoteEvent("note.moved", 31, before_parent_id=10, after_parent_id=3))
    drain_all(world)
    assert stale_snapshots(world) == []


def test_what_a_move_reaches_below_the_moved_note_waits_in_the_wide_lane(world: World) -> None:
    """The moved note and what it names are urgent; its subtree's deeper notes are rebuilt behind
    them, so one big subtree cannot fill the urgent lane."""
    world.source.put(TreeNote(NEW, "Deep", parent_id=31))
    world.rebuild(sorted(i for i, n in world.source.notes.items() if n.deleted_at is None))
    world.edit(10, parent_id=3)
    affected = world.events(NoteEvent("note.moved", 10, before_parent_id=2, after_parent_id=3))
    assert {10, 31, NEW} <= affected
    assert world.state.lanes[10] == "urgent" and world.state.lanes[NEW] != "urgent"


@pytest.mark.parametrize(("event", "moves"), [
    (NoteEvent("note.moved", 10), True),
    (NoteEvent("note.moved", 10, before_parent_id=2, after_parent_id=3), True),
    (NoteEvent("note.moved", 10, before_parent_id=2, after_parent_id=2), False),
    (NoteEvent("note.updated", 10, before_target_id=20, after_target_id=21), True),
    (NoteEvent("note.updated", 10), False),
    (NoteEvent("note.created", 10, after_parent_id=2), False),
], ids=["move-unsaid", "move", "reorder", "relink", "update", "create"])
def test_which_events_walk_below_their_note(world: World, event: NoteEvent, moves: bool) -> None:
    world.source.put(TreeNote(NEW, "Deep", parent_id=31))
    world.rebuild(sorted(i for i, n in world.source.notes.items() if n.deleted_at is None))
    world.source.put(TreeNote(950, "Unbuilt, below Cat", parent_id=NEW))
    assert (950 in world.events(event)) is moves
