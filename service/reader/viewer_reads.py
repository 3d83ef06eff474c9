"""Another viewer's read of a current snapshot: the owner's bytes, a refusal, or their own view.

A focus-context snapshot holds its owner's view (service.viewers). Another user's read of it, on
Doughnut's paths, gets one of three answers, and the verdict is remembered while access holds
(service.access: the access epoch, or the token TTL without change capture), keyed by the
snapshot as stored (note, generation, time of computation) and the viewer:

* **the same**: every viewer-dependent read behind the snapshot answers this viewer as it
  answered the owner (``same_view``), so the snapshot's bytes are this viewer's answer;
* **refused**: computed for this viewer, Doughnut refuses them the note;
* **their own view**: computed for this viewer at the snapshot's traversal limit, so that it
  answers every tokenLimit the snapshot answers, and remembered in this process (never written
  to Redis, never under the owner's key) for at most ``VIEW_KEPT_MS``. Every fact it read is then
  one an event outdates this note by: the owner's snapshot read it (the fact index), or the view
  read it beyond them (the viewer's own notebooks linking in) and it is watched for this note
  (``SnapshotCache.watch_view``, a minute longer than the view is kept). An access change moves
  the epoch, and a computation is a function of the rows and access decisions it read, so while
  neither moved the remembered view is what a computation now would give. The edit race is the
  rebuild's: the edit sequence is read before the computation, the facts are watched after it,
  and then their stamps are read; an edit stamped in between is caught by that read (the view is
  served, not kept), one stamped after it finds the watch and outdates the note. A cache that
  cannot be asked keeps nothing.

So in steady state another viewer's read asks the database nothing: one cache read, and a replay
of the owner's or their own trace. The answers replayed from a kept view are kept beside the
reader's others (service.reader.traces), filed under a name given when the view is kept (a count
of this process, which no stored value's identity equals), so they are reached only through that
view and go unread once it is replaced.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from graphrag.core.errors import CacheUnavailable
from graphrag.wiki.focus.types import NoteNotReadable
from graphrag.wiki.model import Viewer
from service.access import Remembered
from service.answers import Ask, envelope_body
from service.envelope import Envelope, Fact, ReplayMemo, SnapshotKey
from service.metrics import ReaderMetrics
from service.ports import NoteSource
from service.reader.live import LiveReads
from service.reader.served import Served, as_served
from service.viewers import same_view

__all__ = ["ViewerReads"]

#: the verdicts on another viewer's read of a snapshot (module docstring)
_SAME, _REFUSED, _OWN = "same", "refused", "own"
#: own views kept in a process (parsed traces of tens of KB each; the least recently used goes)
MAX_OWN_VIEWS = 512
#: how long an own view is kept at most; the facts it read beyond the owner's snapshot are watched
#: a margin longer (their ``vdep`` keys expire, and a kept view must never outlive its watch)
VIEW_KEPT_MS = 3_600_000
_WATCH_MARGIN_MS = 60_000

Verdict = tuple[SnapshotKey, int, int, Viewer]


class ViewerReads:
    """Serves another viewer's read of a current, fresh snapshot (module docstring)."""

    def __init__(self, source: NoteSource, live: LiveReads, metrics: ReaderMetrics, *,
                 epoch: Callable[[], int], clock_ms: Callable[[], int], ttl_ms: int | None,
                 answers: ReplayMemo | None = None) -> None:
        self.source, self.live, self.metrics, self.answers = source, live, metrics, answers
        self._kept_views = itertools.count()
        self.verdicts: Remembered[str] = Remembered(epoch=epoch, clock_ms=clock_ms, ttl_ms=ttl_ms)
        self.kept_ms = VIEW_KEPT_MS if ttl_ms is None else min(ttl_ms, VIEW_KEPT_MS)
        self.views: Remembered[Envelope] = Remembered(epoch=epoch, clock_ms=clock_ms,
                                                      ttl_ms=self.kept_ms, size=MAX_OWN_VIEWS)

    def serve(self, envelope: Envelope, held: Viewer, ask: Ask, now_ms: int) -> Served:
        """``ask`` (whose viewer is not ``held``, the snapshot's) answered from ``envelope``."""
        served = self.remembered(envelope, ask, now_ms)
        if served is not None:
            return served
        key, asked = _key(envelope, ask), _viewer_of(ask)
        found, verdict = self.verdicts.get(key)
        epoch, at_ms = self.verdicts.started()
        if not found:
            verdict = _SAME if same_view(self.source, envelope.depends_on, held, asked) else _OWN
            self.verdicts.put(key, verdict, epoch=epoch, at_ms=at_ms)
        if verdict == _SAME:
            return self._same(envelope, ask, now_ms)
        if verdict == _REFUSED:
            raise NoteNotReadable(ask.viewer, ask.note_id)
        return self._own(envelope, key, ask)

    def remembered(self, envelope: Envelope, ask: Ask, now_ms: int) -> Served | None:
        """:meth:`serve`'s answer when it is remembered (the owner's bytes, or this viewer's own
        view); None when it would ask the database, compute or refuse: nothing is asked."""
        key = _key(envelope, ask)
        found, verdict = self.verdicts.get(key)
        if found and verdict == _SAME:
            return self._same(envelope, ask, now_ms)
        held, own = self.views.get(key) if found and verdict == _OWN else (False, None)
        if not held or own is None:
            return None
        self.metrics.viewer_remembered.inc()
        return as_served(envelope_body(own, ask), "cache", own.computed_at_ms, now_ms)

    def _same(self, envelope: Envelope, ask: Ask, now_ms: int) -> Served:
        self.metrics.viewer_proven.inc()
        return as_served(envelope_body(envelope, ask), "cache", envelope.computed_at_ms, now_ms)

    def _own(self, envelope: Envelope, key: Verdict, ask: Ask) -> Served:
        """Their own view, computed now (none is kept for ``key``), kept when it is covered."""
        epoch, at_ms = self.views.started()
        seq = self.live.edit_seq()  # before the database (the edit race, module docstring)
        self.metrics.viewer_live.inc()
        try:
            own = self.live.view(ask)
        except NoteNotReadable:
            self.verdicts.put(key, _REFUSED, epoch=epoch, at_ms=at_ms)
            raise
        if self._watched(ask.note_id, set(own.depends_on) - set(envelope.depends_on), seq):
            own.trace  # noqa: B018 (parsed here, in the route's thread, never by the hot read)
            if self.answers is not None:  # (its replays kept under a name no other value has)
                own.adopt_replays(self.answers, ("view", next(self._kept_views)))
            self.views.put(key, own, epoch=epoch, at_ms=at_ms)
        return as_served(envelope_body(own, ask), "live", own.computed_at_ms, own.computed_at_ms)

    def _watched(self, note_id: int, beyond: set[Fact], seq: int | None) -> bool:
        """Whether an event on any fact of ``beyond`` (read by a view, not by the owner's
        snapshot) now outdates the note, none of them edited since ``seq``."""
        if not beyond:
            return True
        if seq is None:
            return False
        try:
            cache = self.live.store
            cache.watch_view(note_id, beyond, ttl_ms=self.kept_ms + _WATCH_MARGIN_MS)
            return not cache.touched_since(beyond, seq)
        except CacheUnavailable:
            return False


def _viewer_of(ask: Ask) -> Viewer:
    assert ask.viewer is not None  # (another viewer's read names one)
    return ask.viewer


def _key(envelope: Envelope, ask: Ask) -> Verdict:
    """Whose read of which snapshot as stored a verdict or a view is kept under."""
    return (ask.key, envelope.generation, envelope.computed_at_ms, _viewer_of(ask))
