"""Running many computations against one view, loading their data together.

Each computation is a generator that yields the :class:`~graphrag.model.Need` it waits for. The driver
advances every computation of the batch to its next need, merges the needs, asks the loader once for
the union (one IN query per kind per round, chunked by the loader), and repeats until all are done. So a
batch of focus notes costs a handful of statements per wave, not per note.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Mapping
from typing import TypeVar

from graphrag.bfs import relationship_bfs
from graphrag.errors import GraphRagError, InvalidParameter
from graphrag.layered import layered
from graphrag.model import Need
from graphrag.outcome import Costing, Outcome
from graphrag.params import STRATEGIES, Request, StrategyParams
from graphrag.view import GraphView
from graphrag.wavefront import wavefront

__all__ = ["Computation", "computation", "run_batch"]

K = TypeVar("K", bound=Hashable)
Computation = Generator[Need, None, Outcome]


def computation(
    strategy: str, costing: Costing, params: StrategyParams, request: Request
) -> Computation:
    """The generator computing ``request`` with ``strategy``."""
    if strategy == "wavefront":
        return wavefront(costing, params.wavefront, request)
    if strategy == "layered":
        return layered(costing, params.layered, request)
    if strategy == "relationship-bfs":
        return relationship_bfs(costing, params.bfs, request)
    raise InvalidParameter("strategy", f"unknown strategy {strategy!r}; choose from {STRATEGIES}")


def _advance(job: Computation) -> Need | Outcome | GraphRagError:
    try:
        return next(job)
    except StopIteration as done:
        value: Outcome = done.value
        return value
    except GraphRagError as err:
        return err


def run_batch(
    jobs: Mapping[K, Computation], view: GraphView, load: Callable[[Need], None]
) -> dict[K, Outcome | GraphRagError]:
    """Drive every job to completion; a job's own error (e.g. NoteNotFound) is its result."""
    results: dict[K, Outcome | GraphRagError] = {}
    waiting = dict(jobs)
    while waiting:
        merged = Need()
        for key, job in list(waiting.items()):
            step = _advance(job)
            if isinstance(step, Need):
                merged = merged | step
            else:
                results[key] = step
                del waiting[key]
        missing = view.missing(merged)
        if missing:
            load(missing)
    return results
