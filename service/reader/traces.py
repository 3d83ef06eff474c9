"""What a reader process keeps of the traces it replayed: the parsed traces, and the answers.

A read at another tokenLimit than a trace snapshot's stored one replays its trace
(service.answers): it inflates the trace frame (about 30 KB on the 100k bench graph), parses its
first line and cuts, and those cost more than the hit itself. Doughnut's clients read the same
notes again and again, at the limits their agents pick (an agent keeps the limit that fits its
window), so the reader keeps two things, both by the value's :attr:`Envelope.trace_identity`:

* the last ``size`` **parsed traces** (about 80 KB each as parsed on the bench graph, more as the
  cuts made on one keep what they derive: graphrag.wiki.focus.cut), so a replay at a new limit
  skips inflating and parsing;
* up to ``answers_bytes`` of **replayed answers**, by tokenLimit and format
  (:class:`KeptAnswers`), so the same read again costs what a hit costs: one cache read and a
  lookup. An answer is a few KB where a parsed trace is tens, so many more reads again are kept
  in the same memory.

Invariants:

* **Only the same bytes.** The identity is the snapshot's note, strategy, seed, generation, time
  of computation, database and the trace's CRC-32, all from the header just read from Redis. Every
  read still reads and checks the stored value first (its generation, freshness, viewer); what is
  kept only replaces inflating, parsing and cutting bytes that name themselves the same, and a
  replay is a function of those bytes, the tokenLimit and the format. A rebuilt snapshot has
  another time of computation, so its trace is parsed anew; the old entries age out.
* **Bounded.** The least recently used goes first: past ``size`` traces, past ``answers_bytes``
  of answers. One answer larger than a sixteenth of the budget is not kept (it would push out
  many), so the budget is never exceeded.
* **Shared safely.** A parsed trace builds a note's fields lazily and keeps them by key
  (graphrag.wiki.focus.stored), so threads replaying it at once build equal values; an answer
  is immutable bytes, and the two stores take a lock for each change.
* ``size`` 0 keeps no trace (``GRAPHRAG_PARSED_TRACES``), ``answers_bytes`` 0 no answer
  (``GRAPHRAG_KEPT_ANSWERS_MB``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from graphrag.wiki.focus.trace import Trace
from service.access import Remembered
from service.envelope import Envelope

__all__ = ["KeptAnswers", "ParsedTraces"]

#: the share of the budget one answer may take at most (module docstring)
_LARGEST_SHARE = 16


class KeptAnswers:
    """Answers by key, at most ``budget_bytes`` of them together, the least recently used
    dropped first (module docstring)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._kept: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def get(self, key: Hashable) -> object | None:
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            self._kept.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, answer: object, size: int) -> None:
        """Keep ``answer`` (``size`` bytes) under ``key``, unless it is too large to keep."""
        if size * _LARGEST_SHARE > self.budget_bytes:
            return
        with self._lock:
            replaced = self._kept.pop(key, None)
            self._bytes += size - (0 if replaced is None else replaced[1])
            self._kept[key] = (answer, size)
            while self._bytes > self.budget_bytes:
                self._bytes -= self._kept.popitem(last=False)[1][1]


class ParsedTraces:
    """The last ``size`` parsed traces of this process and up to ``answers_bytes`` of the answers
    replayed from traces (module docstring)."""

    def __init__(self, size: int, answers_bytes: int = 0) -> None:
        self.size = size
        self._kept: Remembered[Trace] = Remembered(epoch=lambda: 0, clock_ms=lambda: 0,
                                                   ttl_ms=None, size=max(size, 1))
        self.answers = KeptAnswers(answers_bytes)

    def kept_answers(self) -> KeptAnswers | None:
        """Where replayed answers are kept (None: they are not)."""
        return self.answers if self.answers.budget_bytes else None

    def adopt(self, envelope: Envelope) -> None:
        """Give ``envelope`` (just decoded) what was kept from the same bytes: the answers replayed
        from them, and the trace parsed from them."""
        identity = envelope.trace_identity
        if identity is None:
            return
        if self.answers.budget_bytes:
            envelope.adopt_replays(self.answers)
        if self.size and envelope.parsed_trace is None:
            found, trace = self._kept.get(identity)
            if found and trace is not None:
                envelope.adopt_trace(trace)

    def keep(self, envelope: Envelope) -> None:
        """Keep ``envelope``'s trace if it was parsed and is not kept yet."""
        identity, parsed = envelope.trace_identity, envelope.parsed_trace
        if (self.size and identity is not None and parsed is not None
                and not self._kept.get(identity)[0]):
            self._kept.put(identity, parsed, epoch=0, at_ms=0)
