"""The nightly dispatcher: pieces from a cursor, back-pressure and progress (fast)."""

from __future__ import annotations

from ops.generate import generate
from service.dispatch import dispatch_pieces
from storage.memory import MemoryProgress
from tests.usecases.conftest import World, new_world


def test_progress_finishes_when_every_enqueued_note_is_done(world: World) -> None:
    progress = MemoryProgress(world.state)
    progress.start("run", now_ms=1)
    progress.enqueued("run", 10, last_id=10)
    progress.dispatched("run", now_ms=2)
    progress.done("run", 4, errors=0, now_ms=3)
    assert "finishedAt" not in progress.status()
    progress.done("run", 6, errors=1, now_ms=4)
    assert progress.status()["finishedAt"] == 4 and progress.status()["errors"] == 1
    progress.done("old-run", 100, errors=0, now_ms=5)  # a late message of another run
    assert progress.status()["done"] == 10


def test_pieces_hand_out_every_live_id_once_by_notebook_from_a_cursor() -> None:
    world = new_world(list(generate(300, 4)))
    progress = MemoryProgress(world.state)
    progress.start("run", now_ms=1)
    handed: list[list[int]] = []
    step = dispatch_pieces(world.source, progress, run_id="run", after=None, pieces=3, max_notes=30,
                           backlog=lambda: 0, max_backlog=5, enqueue=handed.append,
                           now_ms=world.clock)
    while step.state == "more":
        step = dispatch_pieces(world.source, progress, run_id="run", after=step.cursor, pieces=3,
                               max_notes=30, backlog=lambda: 0, max_backlog=5,
                               enqueue=handed.append, now_ms=world.clock)
    assert step.state == "finished"
    assert handed == [p.ids for p in world.source.workspaces(30)]
    assert sorted(i for p in handed for i in p) == world.source.live_ids_after(0, 10_000)
    assert progress.status()["enqueued"] == world.source.count_live()


def test_a_full_bulk_queue_makes_the_piece_dispatcher_wait() -> None:
    world = new_world(list(generate(100, 5)))
    progress = MemoryProgress(world.state)
    progress.start("run", now_ms=1)
    handed: list[list[int]] = []
    step = dispatch_pieces(world.source, progress, run_id="run", after=(3, 17), pieces=5,
                           max_notes=10, backlog=lambda: 6, max_backlog=5, enqueue=handed.append,
                           now_ms=world.clock)
    assert (step.state, step.cursor, handed) == ("waiting", (3, 17), [])
