"""The full rebuild over whole workspaces (service.full_rebuild) writes, byte for byte, what the
batched path writes, on random graphs of both models; and an edit that lands while a piece is
loaded or computed is never left standing behind older data.

Both paths run over in-memory ports, each into a cache of its own at the same clock: every stored
value (key and bytes) must be equal. Pieces are made small (a notebook cut into runs) so that a
focus's neighbours lie in other pieces and are loaded on demand, as a big notebook's are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any

import pytest

from graphrag import CharsCounter, StrategyParams
from ops.generate import generate
from service.carry import Carry
from service.context import ContextService
from service.full_rebuild import rebuild_pieces
from service.note_event import NoteEvent
from service.rebuild import rebuild
from storage.memory import MemoryState
from storage.memory_cache import MemoryCache
from tests.storage.wiki_rows import random_graph
from tests.usecases.conftest import (
    LAYERED_LIMITS,
    MAX_LIMIT,
    SEEDS,
    STRATEGIES,
    World,
    drain_all,
    new_world,
    stale_snapshots,
)
from tests.usecases.test_focus_snapshots import NOW_MS, Wiki

STRATEGY_2026 = "focus-context"


def _stored(state: MemoryState) -> dict[Any, bytes]:
    return {key: data for key, (data, _) in state.snapshots.items()}


def _full(world: World, max_notes: int, service: ContextService | None = None,
          carry: Carry | None = None) -> Any:
    return rebuild_pieces(service or world.service, world.cache,
                          (p.ids for p in world.source.workspaces(max_notes)),
                          strategies=world.strategies, seeds=SEEDS, max_token_limit=MAX_LIMIT,
                          layered_limits=LAYERED_LIMITS, now_ms=world.clock(), batch_size=20,
                          carry=carry)


def _most_reads(ids: Iterable[Hashable]) -> int:
    """How often the row read most often was read."""
    return max(Counter(ids).values(), default=0)


@pytest.mark.parametrize("seed", range(3))
def test_the_tree_full_path_writes_the_batched_bytes(seed: int) -> None:
    records = list(generate(300, seed))
    batched, full = new_world(records), new_world(records)
    ids = sorted(n.id for n in records if n.deleted_at is None)
    assert batched.rebuild(ids, batch_size=20).errors == {}
    report = _full(full, max_notes=45)
    assert report.errors == {} and report.foci == len(ids)
    assert _stored(full.state) == _stored(batched.state)
    assert len(_stored(full.state)) == len(ids) * (len(STRATEGIES) + 1) * len(SEEDS)


@pytest.mark.parametrize("seed", range(3))
def test_the_wiki_full_path_writes_the_batched_bytes(seed: int) -> None:
    batched, full = Wiki(random_graph(seed, notes=60)), Wiki(random_graph(seed, notes=60))
    assert batched.rebuild(batched.live_ids()).errors == {}
    pieces = [p.ids for p in full.db.workspaces(7)]
    assert sorted(i for p in pieces for i in p) == full.live_ids()
    report = rebuild_pieces(full.service, full.cache, pieces, strategies=(STRATEGY_2026,),
                            seeds=(7,), max_token_limit=4000, now_ms=NOW_MS, batch_size=5)
    assert report.errors == {}
    assert _stored(full.state) == _stored(batched.state) and _stored(full.state)


def test_a_run_decodes_each_note_row_once_while_no_edit_is_recorded() -> None:
    """Pieces are small, so many a focus shows notes of other pieces: the workspace carried on
    from piece to piece has them already when their own piece, or another that shows them, comes.
    Without the carry (bound 0) rows are read again, which is what the test would catch."""
    records = list(generate(300, 4))
    carried, per_piece = new_world(records), new_world(records)
    _full(carried, max_notes=30)
    _full(per_piece, max_notes=30, carry=Carry(max_foci=0))
    assert _most_reads(i for need in carried.source.loads for i in need.rows) == 1
    assert _most_reads(i for need in per_piece.source.loads for i in need.rows) > 1
    assert _stored(carried.state) == _stored(per_piece.state)


def _most_asked(needs: list[Any]) -> int:
    """How often the same thing of one kind (a note's row, its links, a group's peers, ...) was
    asked for, at most."""
    return max(_most_reads((kind.name, key) for need in needs for kind in fields(need)
                           for key in getattr(need, kind.name)), 0)


def test_a_wiki_run_decodes_each_note_row_once_while_no_edit_is_recorded() -> None:
    carried, per_piece = Wiki(random_graph(5, notes=60)), Wiki(random_graph(5, notes=60))
    for wiki, carry in ((carried, None), (per_piece, Carry(max_foci=0))):
        rebuild_pieces(wiki.service, wiki.cache, [p.ids for p in wiki.db.workspaces(7)],
                       strategies=(STRATEGY_2026,), seeds=(7,), max_token_limit=4000,
                       now_ms=NOW_MS, batch_size=5, carry=carry)
    assert _most_asked(carried.db.asked) == 1  # each row, list and sample once
    assert _most_asked(per_piece.db.asked) > 1
    assert _stored(carried.state) == _stored(per_piece.state)


def test_an_event_between_pieces_starts_the_next_piece_afresh() -> None:
    """The next piece must not read a note as it was before an edit its event announced."""
    records = list(generate(200, 5))
    world = new_world(records)
    ids = sorted(n.id for n in records if n.deleted_at is None)
    world.rebuild(ids)
    carry, pieces = Carry(), [p.ids for p in world.source.workspaces(40)]

    def piece(k: int) -> None:
        rebuild_pieces(world.service, world.cache, [pieces[k]], strategies=world.strategies,
                       seeds=SEEDS, max_token_limit=MAX_LIMIT, layered_limits=LAYERED_LIMITS,
                       now_ms=world.clock(), carry=carry)

    piece(0)
    before = len(world.source.loads)
    piece(0)  # the same seq: everything it needs is carried
    assert len(world.source.loads) == before
    shown = pieces[0][1]
    world.edit(shown, title="Edited between two pieces")
    world.events(NoteEvent("note.updated", shown))
    piece(0)
    assert any(shown in need.rows for need in world.source.loads[before:])
    assert stale_snapshots(world, only=pieces[0]) == []  # the piece itself, before any drain
    drain_all(world)
    assert stale_snapshots(world) == []


class _EditAfterALoad:
    """The world's source, where ``edit`` (Doughnut committing an edit and posting its event)
    runs right after the ``after``-th load: the rows read stay in the workspace, older."""

    def __init__(self, world: World, edit: Callable[[], object], after: int) -> None:
        self.world, self.edit, self.after = world, edit, after

    def __getattr__(self, name: str) -> Any:
        return getattr(self.world.source, name)

    @contextmanager
    def batch(self) -> Iterator[Callable[[Any, Any], None]]:
        with self.world.source.batch() as load:
            def hooked(view: Any, need: Any) -> None:
                load(view, need)
                self.after -= 1
                if self.after == 0:
                    self.edit()
            yield hooked


@pytest.mark.parametrize("after", [1, 2, 5])
def test_an_edit_landing_during_a_piece_is_never_left_behind_older_data(after: int) -> None:
    """After the first load (the preload: the edited row is in the workspace, old) or later ones
    (some foci computed already): every snapshot that shows the note is refused, or outdated and
    queued again, and a drain leaves nothing stale."""
    records = list(generate(200, 1))
    world = new_world(records)
    ids = sorted(n.id for n in records if n.deleted_at is None)
    world.rebuild(ids)
    edited = ids[len(ids) // 3]

    def edit() -> None:
        world.edit(edited, title="Edited while the piece was computed")
        world.events(NoteEvent("note.updated", edited))

    source = _EditAfterALoad(world, edit, after)
    service = ContextService(source, CharsCounter(), StrategyParams())  # type: ignore[arg-type]
    world.now[0] += 1_000
    report = _full(world, max_notes=10_000, service=service)
    assert report.errors == {}
    problems = stale_snapshots(world)
    assert all("outdated" in p or "missing" in p for p in problems), problems[:3]
    drain_all(world)
    assert stale_snapshots(world) == []


def test_a_full_run_after_an_edit_with_no_event_shows_it_everywhere() -> None:
    """What a full rebuild is for: an edit no event announced is read afresh by every piece."""
    records = list(generate(200, 2))
    world = new_world(records)
    ids = sorted(n.id for n in records if n.deleted_at is None)
    world.rebuild(ids)
    world.edit(ids[5], title="Changed without an event")
    assert stale_snapshots(world) != []
    world.now[0] += 1_000
    _full(world, max_notes=40)
    assert stale_snapshots(world) == []


@pytest.mark.parametrize("max_notes", [1, 25, 70, 10_000])
def test_pieces_hold_every_live_note_once_in_notebook_order_and_at_most_max_notes(
    max_notes: int,
) -> None:
    records = list(generate(300, 3))
    world = new_world(records)
    pieces = list(world.source.workspaces(max_notes))
    live = {n.id: n.notebook_id for n in records if n.deleted_at is None}
    in_order = sorted(live, key=lambda i: (live[i] is None, live[i] or 0, i))
    assert [i for p in pieces for i in p.ids] == in_order
    assert all(0 < len(p.ids) <= max_notes for p in pieces)
    assert all(len(p.ids) == max_notes for p in pieces[:-1])  # small notebooks share a piece
    assert all(live[p.ids[-1]] == p.notebook for p in pieces)
    for k, piece in enumerate(pieces[:-1]):  # continuing after any piece gives the rest
        assert list(world.source.workspaces(max_notes, after=piece.cursor)) == pieces[k + 1:]


def test_a_rebuild_of_no_pieces_writes_nothing() -> None:
    state = MemoryState()
    world = new_world([])
    report = rebuild_pieces(world.service, MemoryCache(state), [], strategies=STRATEGIES, seeds=SEEDS,
                            max_token_limit=MAX_LIMIT, now_ms=NOW_MS)
    assert (report.count, report.foci, state.snapshots) == (0, 0, {})
    assert rebuild is not None
