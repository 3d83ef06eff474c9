"""A restore resolved after the tree moved on still reaches every note it brought back.

A restore event names its root only; the event task finds what came back by walking the tree from
that root, when it runs. Seen as missing snapshots after the SIGKILL suites (the event waited for a
worker): a note created and deleted before any drain reached it had no snapshot and so no entry in
any reverse index; its subtree was restored, then an ancestor of it (or the target of a link
pointing into the subtree) moved out of the restored subtree before the restore's event ran. The
walk from the root no longer found it, and the move's own event named the moved note, its
neighbours and the foci whose snapshots show it, none of which was the note: nothing ever built
it again. Each test replays that order of commits and events, both ways round.
"""

from __future__ import annotations

import datetime as dt

import pytest

from service.envelope import SnapshotKey
from service.note_event import NoteEvent
from storage.records import TreeNote
from tests.usecases.conftest import SEEDS, World, current, drain_all

DELETED_AT = dt.datetime(2026, 1, 1)
NEW = 900  # created under Cat's second child (a leaf), deleted with Cat before any drain reached it
LINK = 901  # in notebook B, pointing into Cat's subtree: deleted with it
LINK_TO_LINK = 902  # in notebook B, pointing at LINK: not deleted, but its object goes and comes back


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


@pytest.mark.parametrize("restore_first", [True, False], ids=["restore-event-first",
                                                              "move-event-first"])
def test_a_restored_note_whose_ancestor_moved_out_before_the_restore_ran_is_built(
        world: World, restore_first: bool) -> None:
    restored = _cat_deleted_then_restored(world)
    assert {31, NEW} <= restored
    world.edit(31, parent_id=3)  # the new note's parent moves to Plants
    moved = NoteEvent("note.moved", 31, before_parent_id=10, after_parent_id=3)
    restore = NoteEvent("note.restored", 10)
    world.events(*((restore, moved) if restore_first else (moved, restore)))
    drain_all(world)
    assert current(world, NEW).note_id == NEW
    assert b"Plants" in current(world, NEW).result_json  # its contextualPath after the move


@pytest.mark.parametrize("restore_first", [True, False], ids=["restore-event-first",
                                                              "relink-event-first"])
def test_a_link_to_a_restored_link_that_was_relinked_before_the_restore_ran_shows_its_object(
        world: World, restore_first: bool) -> None:
    _cat_deleted_then_restored(world)
    world.edit(LINK, target_note_id=63)  # the restored link now points out of Cat's subtree
    relinked = NoteEvent("note.updated", LINK, before_target_id=32, after_target_id=63)
    restore = NoteEvent("note.restored", 10)
    world.events(*((restore, relinked) if restore_first else (relinked, restore)))
    drain_all(world)
    assert f'"/n{LINK}"'.encode() in current(world, LINK_TO_LINK).result_json


def test_a_link_whose_target_moved_out_before_the_restore_ran_is_rebuilt(world: World) -> None:
    """The link's target (32) leaves Cat's subtree; the link, restored with it, is found through
    the moved note, and so is the link pointing at the link."""
    _cat_deleted_then_restored(world)
    world.edit(32, parent_id=4)
    world.events(NoteEvent("note.restored", 10),
                 NoteEvent("note.moved", 32, before_parent_id=10, after_parent_id=4))
    drain_all(world)
    assert current(world, LINK).note_id == LINK
    assert f'"/n{LINK}"'.encode() in current(world, LINK_TO_LINK).result_json


def test_a_move_marks_its_subtree_as_affected_not_as_edited(world: World) -> None:
    """The descendants of a moved note get rebuilt (their paths changed) but are not stamped as
    edited: their rows did not change, and a rebuild that read them before the move is not raced
    by their own stamps (the moved note's stamp covers every snapshot that shows it)."""
    world.rebuild(sorted(i for i, n in world.source.notes.items() if n.deleted_at is None))
    seq = world.cache.current_seq()
    world.edit(10, parent_id=3)
    affected = world.events(NoteEvent("note.moved", 10, before_parent_id=2, after_parent_id=3))
    assert {10, 30, 31, 32, 33, 40, 43} <= affected
    touched = world.cache.touched_since([10, 30, 31, 32, 33], seq)
    assert touched == {10}

