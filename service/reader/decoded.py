"""The values a reader process decoded lately, by their bytes: a hit read again is not decoded again.

Every read reads the stored value from Redis (one MGET with its note's generation), and decoding it
(splitting the header from the result, parsing and checking the header, the CRC-32 of the result
and of the trace; for a packed value, inflating the result) cost about a tenth of a hit over HTTP.
Doughnut's clients read the same notes again and again, so :class:`DecodedValues` keeps the last
values decoded, by the stored bytes themselves.

Invariants:

* **Only the same bytes.** An entry is found only for bytes equal to the ones decoded (a dict keyed
  by the bytes: equal hash and equal content), and :func:`service.decoding.decode_envelope` is a
  function of the bytes alone, so what is found is what decoding them now would give. Nothing is
  skipped that decides what is served: the read still reads the value and its note's generation
  from Redis first, and checks generation, freshness, database and viewer on the envelope found.
* **Each read its own envelope, as decoded.** What is kept is the envelope as decoding gave it,
  and each read is given a copy of its fields alone (:meth:`~service.envelope.Envelope.as_decoded`):
  what one read derives from it (the parsed result, the inflated and parsed trace, the replays it
  adopts) stays with that read's copy, as before. So what is kept here never grows, and the parsed
  traces and replayed answers stay within their own bounds (service.reader.traces).
* **Bounded.** At most ``budget_bytes`` of stored bytes are kept (each entry counted twice, for its
  bytes and the decoded parts that copy them); the least recently used goes first. A value larger than
  a sixteenth of the budget is not kept, and budget 0 keeps nothing (``GRAPHRAG_DECODED_VALUES_MB``).
  Values that do not decode are never kept.
* **Shared by threads.** Each lookup and change takes the store's lock.
"""

from __future__ import annotations

from service.decoding import decode_envelope
from service.envelope import Envelope
from service.reader.traces import KeptAnswers

__all__ = ["DecodedValues"]


class DecodedValues:
    """Decoded envelopes by their stored bytes, up to ``budget_bytes`` (module docstring): kept as
    the reader keeps its replayed answers (:class:`~service.reader.traces.KeptAnswers`: the least
    recently used dropped first, none larger than a sixteenth of the budget)."""

    def __init__(self, budget_bytes: int) -> None:
        self._kept = KeptAnswers(budget_bytes)

    @property
    def budget_bytes(self) -> int:
        return self._kept.budget_bytes

    @property
    def kept_bytes(self) -> int:
        return self._kept.kept_bytes

    def decode(self, raw: bytes | None) -> Envelope | None:
        """:func:`decode_envelope` of ``raw``: the one kept for the same bytes, else decoded now
        and kept."""
        if raw is None:
            return None
        found = self._kept.get(raw)
        if isinstance(found, Envelope):
            return found.as_decoded()
        envelope = decode_envelope(raw)
        if envelope is not None:
            self._kept.put(raw, envelope.as_decoded(), 2 * len(raw))
        return envelope
