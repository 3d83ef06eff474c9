"""Running many computations against one view, loading their data together.

Each computation is a generator that yields the need it waits for (its graph model's kind). The driver
advances every computation of the batch to its next need, merges the needs, asks the loader once for
the union (one IN query per kind per round, chunked by the loader), and repeats until all are done. So a
batch of focus notes costs a handful of statements per wave, not per note.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Hashable, Mapping
from functools import reduce
from operator import or_
from typing import Any, Protocol, TypeVar

from graphrag.core import strategy as registry
from graphrag.core.errors import GraphRagError
from graphrag.core.params import Request, StrategyParams

__all__ = ["Computation", "computation", "run_batch"]

K = TypeVar("K", bound=Hashable)
#: A strategy's computation: yields needs (of its graph model), returns its outcome.
Computation = Generator[Any, None, Any]


class View(Protocol):
    """What the driver needs of a graph model's view: which part of a need is not loaded yet."""

    def missing(self, need: Any) -> Any: ...


def computation(strategy: str, workspace: Any, params: StrategyParams, request: Request) -> Computation:
    """The generator computing ``request`` with the registered ``strategy``."""
    spec = registry.get(strategy)
    return spec.run(workspace, params.of(strategy), request)  # type: ignore[no-any-return]


def _advance(job: Computation) -> Any:
    try:
        return _Step(next(job))
    except StopIteration as done:
        return done.value
    except GraphRagError as err:
        # the result outlives the job: its traceback's frames would hold the job's workspace
        return err.with_traceback(None)


class _Step:
    """A need a job yielded (wrapped, so any outcome type can be told apart from it)."""

    __slots__ = ("need",)

    def __init__(self, need: Any) -> None:
        self.need = need


def run_batch(
    jobs: Mapping[K, Computation], view: View, load: Callable[[Any], None]
) -> dict[K, Any]:
    """Drive every job to completion; a job's own error (e.g. NoteNotFound) is its result.

    Each round advances every waiting job to its next need, merges the needs (``|``, or the need
    type's ``union`` of them all) and loads what the view lacks of the union once; jobs of one
    batch share one view, so one graph model.
    """
    results: dict[K, Any] = {}
    waiting = dict(jobs)
    while waiting:
        needs: list[Any] = []
        for key, job in list(waiting.items()):
            step = _advance(job)
            if isinstance(step, _Step):
                needs.append(step.need)
            else:
                results[key] = step
                del waiting[key]
        if needs and (missing := view.missing(_union(needs))):
            load(missing)
    return results


def _union(needs: list[Any]) -> Any:
    """The needs merged: in one pass by the need type's ``union`` when it has one (merging pairwise
    copies what was merged so far at every step: quadratic in a batch of hundreds of jobs)."""
    union = getattr(type(needs[0]), "union", None)
    return union(needs) if union is not None else reduce(or_, needs)
