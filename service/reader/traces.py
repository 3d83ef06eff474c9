"""Parsed traces kept by a reader process, so a replay of a snapshot read again skips the parse.

A read at another tokenLimit than a trace snapshot's stored one replays its trace
(service.answers): it inflates the trace frame (about 47 KB on the 100k bench graph) and parses its
first line before the cut, and those two cost more than the cut. Doughnut's clients read the same
notes again and again at the limits their agents pick, so the reader keeps the last
``size`` parsed traces (about 80 KB each as parsed on the bench graph, more as the cuts made on
one keep what they derive: graphrag.wiki.focus.cut) and gives a value read from the same stored bytes the
trace parsed before.

* **Only the same bytes.** A kept trace is found by the value's :attr:`Envelope.trace_identity`:
  the snapshot's note, strategy, seed, generation, time of computation, database and the trace's
  CRC-32, all from the header just read from Redis. Every read still reads and checks the stored
  value first (its generation, freshness, viewer); what is kept only replaces inflating and
  parsing bytes that name themselves the same. A rebuilt snapshot has another time of
  computation, so its trace is parsed anew; the old one ages out.
* **Shared safely.** A parsed trace builds a note's fields lazily and keeps them by key
  (graphrag.wiki.focus.stored), so threads replaying it at once build equal values.
* ``size`` 0 keeps nothing (``GRAPHRAG_PARSED_TRACES``).
"""

from __future__ import annotations

from graphrag.wiki.focus.trace import Trace
from service.access import Remembered
from service.envelope import Envelope

__all__ = ["ParsedTraces"]


class ParsedTraces:
    """The last ``size`` parsed traces of this process (module docstring)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: Remembered[Trace] = Remembered(epoch=lambda: 0, clock_ms=lambda: 0,
                                                   ttl_ms=None, size=max(size, 1))

    def adopt(self, envelope: Envelope) -> None:
        """Give ``envelope`` (just decoded) the trace parsed before from the same bytes, if kept."""
        identity = envelope.trace_identity
        if self.size and identity is not None and envelope.parsed_trace is None:
            found, trace = self._kept.get(identity)
            if found and trace is not None:
                envelope.adopt_trace(trace)

    def keep(self, envelope: Envelope) -> None:
        """Keep ``envelope``'s trace if it was parsed and is not kept yet."""
        identity, parsed = envelope.trace_identity, envelope.parsed_trace
        if (self.size and identity is not None and parsed is not None
                and not self._kept.get(identity)[0]):
            self._kept.put(identity, parsed, epoch=0, at_ms=0)
