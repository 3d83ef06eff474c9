"""Where a first-sight rebuild's time goes, timed in place (no profiler between the calls).

cProfile (ops.bench.profile) names the functions but doubles the time of small ones. Here the
wavefront rebuild of the rebuild section's foci runs as the nightly does (``Wiring.rebuild``: its
pages, epochs and carry), through three timing wrappers:

* ``sql``: every batched load of the source (the statements, the server's work, the driver's
  decoding, filling the view);
* ``tokens``: every call of the token counter (tiktoken, without the worker's memo: first sight);
* ``write``: every ``write_many`` of the cache (the compare-and-set and reverse-index pipeline).

What is left (``rest``) is the algorithm, rendering, the generation and ``seq`` reads and the edit
race check. A page of other foci runs first, untimed (statement caches, the encoder's tables).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

from ops.bench.graph import Graph, wiring_for
from ops.bench.helpers import ratio, say
from ops.bench.plan import PAGE, Bench
from service.context import ContextService

__all__ = ["PARTS", "split_rebuild"]

PARTS = ("sql", "tokens", "write")


@dataclass
class _Clock:
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[part] += time.perf_counter() - started


class _Timed:
    """``inner`` with the methods named in ``parts`` timed into ``clock``; the rest passes through."""

    def __init__(self, inner: Any, clock: _Clock, parts: dict[str, str]) -> None:
        self._inner, self._clock, self._parts = inner, clock, parts

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if name not in self._parts:
            return found
        return self._wrap(found, self._parts[name])

    def _wrap(self, call: Callable[..., Any], part: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            with self._clock.timing(part):
                return call(*args, **kwargs)
        return timed


class _TimedSource(_Timed):
    """A source whose batch loader is timed (``batch`` itself hands out a loader, not the loads)."""

    @contextmanager
    def batch(self) -> Iterator[Any]:
        with self._inner.batch() as load:
            yield self._wrap(load, "sql")


def split_rebuild(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    """Milliseconds per snapshot of each part (and ``rest``) of a wavefront rebuild of ``foci``."""
    clock, shared, wiring = _Clock(), graph.service, wiring_for(bench, graph, "split")
    wiring.service = ContextService(cast(Any, _TimedSource(shared.store, clock, {})),
                                    cast(Any, _Timed(shared.counter, clock, {"count": "tokens"})),
                                    shared.params)
    wiring.cache = cast(Any, _Timed(wiring.cache, clock, {"write_many": "write"}))
    ids, warm = foci[PAGE:], foci[:PAGE]
    wiring.rebuild(warm)
    clock.seconds = dict.fromkeys(PARTS, 0.0)
    report = wiring.rebuild(ids)
    ms = {part: ratio(seconds * 1000, report.count) for part, seconds in clock.seconds.items()}
    ms["rest"] = ratio((report.seconds - sum(clock.seconds.values())) * 1000, report.count)
    say("rebuild time per snapshot, timed in place: "
        + ", ".join(f"{part} {value:.2f} ms" for part, value in ms.items()))
    return {"strategy": "wavefront", "notes": len(ids), "snapshots": report.count,
            "seconds": round(report.seconds, 3), "ms_per_snapshot": ms}
