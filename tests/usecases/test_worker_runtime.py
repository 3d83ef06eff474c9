"""A worker process's runtime (worker.celery.runtime.runtime_of) carries a full rebuild's workspace
from one ``rebuild_piece`` to the next, lets it go when a drain comes (an event moved the edit
``seq``) and when the process sat idle after its last piece (worker.celery.idle), and never holds
one for a carry bound of 0. Over in-memory ports, in seconds."""

from __future__ import annotations

import threading
import time

import fakeredis
import pytest
from celery import Celery

from service.carry import Carry
from tests.reliability.harness import settings_from
from tests.usecases.conftest import LAYERED_LIMITS, MAX_LIMIT, SEEDS, STRATEGIES, World
from worker.celery.idle import IdleRelease
from worker.celery.runtime import runtime_of
from worker.compose import Wiring

WAIT_S = 10.0  # an upper bound for a timer to fire, never a measured duration


def wiring_over(world: World, **env: str) -> Wiring:
    settings = settings_from({
        "GRAPHRAG_STRATEGIES": ",".join(STRATEGIES), "GRAPHRAG_SEEDS": ",".join(map(str, SEEDS)),
        "GRAPHRAG_MAX_TOKEN_LIMIT": str(MAX_LIMIT),
        "GRAPHRAG_LAYERED_LIMITS": ",".join(map(str, LAYERED_LIMITS)), **env})
    wiring = Wiring(settings, redis_client=fakeredis.FakeRedis())
    wiring.__dict__.update(source=world.source, service=world.service, cache=world.cache,
                           dirty=world.dirty, coordination=world.coordination)
    return wiring


def loads_of(world: World, call: object, *args: object) -> int:
    before = len(world.source.loads)
    call(*args)  # type: ignore[operator]
    return len(world.source.loads) - before


def piece_of(world: World) -> list[int]:
    return world.source.live_ids_after(0, 10_000)


def test_pieces_share_the_process_workspace_until_a_drain_lets_it_go(world: World) -> None:
    wiring = wiring_over(world, GRAPHRAG_PIECE_CARRY_IDLE_S="3600")
    runtime = runtime_of(wiring, Celery())
    ids = piece_of(world)
    assert loads_of(world, runtime.rebuild_piece, ids) > 0
    assert loads_of(world, runtime.rebuild_piece, ids) == 0  # carried: nothing read again
    assert wiring.pieces.holds()
    runtime.rebuild(ids[:1])
    assert not wiring.pieces.holds()
    assert loads_of(world, runtime.rebuild_piece, ids) > 0


def test_an_idle_process_lets_its_workspace_go(world: World) -> None:
    wiring = wiring_over(world, GRAPHRAG_PIECE_CARRY_IDLE_S="0.05")
    runtime_of(wiring, Celery()).rebuild_piece(piece_of(world))
    assert released_within(wiring.pieces, WAIT_S)


def test_a_carry_bound_of_zero_holds_no_workspace(world: World) -> None:
    wiring = wiring_over(world, GRAPHRAG_PIECE_CARRY_FOCI="0")
    runtime = runtime_of(wiring, Celery())
    ids = piece_of(world)
    assert loads_of(world, runtime.rebuild_piece, ids) > 0
    assert not wiring.pieces.holds()
    assert loads_of(world, runtime.rebuild_piece, ids) > 0


def released_within(carry: Carry, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while carry.holds() and time.monotonic() < deadline:
        time.sleep(0.01)
    return not carry.holds()


def holding(carry: Carry) -> Carry:
    carry._held[threading.get_ident()] = object()  # type: ignore[assignment]
    return carry


def test_a_piece_in_progress_keeps_the_workspace_past_the_idle_time() -> None:
    carry = holding(Carry())
    idle = IdleRelease(carry, 0.01)
    with idle.in_use():
        pass  # a piece ended: the timer is armed
    holding(carry)
    with idle.in_use():  # the next piece disarms it before it could fire
        threading.Event().wait(0.2)
        assert carry.holds()
    assert released_within(carry, WAIT_S)


def test_the_timer_waits_for_the_last_of_overlapping_pieces() -> None:
    carry, first_done, second_done = holding(Carry()), threading.Event(), threading.Event()
    idle = IdleRelease(carry, 0.01)

    def second_piece() -> None:
        with idle.in_use():
            first_done.wait(WAIT_S)
            threading.Event().wait(0.2)  # the first piece ended 0.2 s ago: past idle_s
            assert carry.holds()
        second_done.set()

    with idle.in_use():
        worker = threading.Thread(target=second_piece)
        worker.start()
        threading.Event().wait(0.05)
    first_done.set()
    assert second_done.wait(WAIT_S)
    worker.join()
    assert released_within(carry, WAIT_S)


def test_a_drains_carry_is_let_go_once_too_old_to_use(world: World) -> None:
    wiring = wiring_over(world, GRAPHRAG_CARRY_AGE_MS="50")
    runtime_of(wiring, Celery()).rebuild(piece_of(world)[:3])
    assert released_within(wiring.drains, WAIT_S)


@pytest.mark.parametrize("threads", [1, 3])
def test_release_reaches_every_thread(world: World, threads: int) -> None:
    carry, together = Carry(), threading.Barrier(threads)

    def take() -> None:
        carry.workspace(world.service, seq=1, foci=1)
        together.wait(WAIT_S)  # all alive at once: each has a workspace of its own

    workers = [threading.Thread(target=take) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(carry._held) == threads
    carry.release()
    assert not carry.holds()


def test_the_drains_batch_and_budget_come_from_the_settings(world: World) -> None:
    default = runtime_of(wiring_over(world), Celery())
    assert (default.drain_batch, default.drain_budget_s) == (100, 0.25)
    tuned = runtime_of(wiring_over(world, GRAPHRAG_DRAIN_BATCH="32", GRAPHRAG_DRAIN_BUDGET_MS="80"),
                       Celery())
    assert (tuned.drain_batch, tuned.drain_budget_s) == (32, 0.08)
