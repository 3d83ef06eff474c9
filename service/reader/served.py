"""What a read returns, and which snapshot can answer which read.

:class:`ReaderConfig` says which snapshots exist (strategies, seeds, the largest tokenLimit,
layered's limits) and bounds the waits of a miss; :class:`Served` is an answer with where it came
from. :func:`usable` is the one test of whether a stored snapshot can answer an ask, used both
before and after a miss's lock (service.reader.live), so the two can never disagree. Its
invariants:

* **A snapshot answers only the ask it was computed for**: the same note, seed and strategy, and a
  stored tokenLimit at least the one asked; anything else is a miss, never a wrong answer.
* **A smaller tokenLimit is a prefix slice only where slicing is exact** (the envelope says it is
  ``sliceable``); a trace strategy answers from its stored result when it is ready for the limit
  asked, or replays its trace (service.answers), and never from an envelope without one.
* **An answer's age is never negative**: :func:`as_served` measures it from when the answer was
  computed, clamped at 0 when a clock stepped back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from service.answers import Answer, Ask, kept_answer, ready
from service.envelope import Envelope

__all__ = ["ReaderConfig", "Served", "Source", "as_served", "usable"]

Source = Literal["cache", "stale", "live"]


@dataclass(frozen=True, slots=True)
class ReaderConfig:
    """What snapshots exist: strategies, seeds, the maximum tokenLimit and layered's limits.
    ``strategies`` None: the registry's default strategy of the source's graph model."""

    strategies: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None
    seeds: tuple[int, ...] = (0,)
    max_token_limit: int = 5000
    layered_limits: tuple[int, ...] = (2500, 5000)
    lock_ttl_ms: int = 10_000
    lock_wait_ms: int = 3_000
    refresh_claim_s: int = 300
    #: parsed traces a process keeps for replays of snapshots read again (service.reader.traces)
    parsed_traces: int = 512
    #: bytes of replayed answers a process keeps for the same reads again (service.reader.traces)
    kept_answers_bytes: int = 32 * 2**20
    #: stored bytes of the values a process keeps decoded, for hits read again (service.reader.decoded)
    decoded_values_bytes: int = 32 * 2**20


@dataclass(frozen=True, slots=True)
class Served:
    """An answer and where it came from; ``age_s`` = seconds since it was computed. ``body`` is the
    result JSON, or for a markdown read ``{"markdown": ...}`` with the text itself in ``text``.
    ``reason``: why no snapshot was trusted for it, when the change feed is behind."""

    body: bytes
    source: Source
    age_s: float
    text: str | None = None
    #: why the snapshots were not trusted for this read (the change feed is behind: service.feed)
    reason: str | None = None
    #: when the answer was computed (ms since the epoch): the snapshot's time, or the read's if live
    computed_at_ms: int = 0


def as_served(answer: Answer, source: Source, at_ms: int, now_ms: int) -> Served:
    """``at_ms``: when the answer was computed (the snapshot's time, or the live request's)."""
    return Served(answer.body, source, max(0.0, (now_ms - at_ms) / 1000), answer.text,
                  computed_at_ms=at_ms)


def usable(envelope: Envelope | None, ask: Ask, database: str = "") -> Envelope | None:
    """The envelope if it can answer this ask at all (fresh or stale); None is a miss. One of
    another ``database`` than the reader's (service.binding) never answers."""
    if envelope is None or envelope.note_id != ask.note_id or envelope.seed != ask.seed:
        return None
    if envelope.database != database:
        return None
    if envelope.strategy != ask.strategy or envelope.max_token_limit < ask.token_limit:
        return None
    if ask.traced:
        answerable = (ready(envelope, ask) or kept_answer(envelope, ask) is not None
                      or envelope.trace is not None)
        return envelope if envelope.traced and answerable else None
    if ask.token_limit < envelope.max_token_limit and not envelope.sliceable:
        return None
    return envelope
