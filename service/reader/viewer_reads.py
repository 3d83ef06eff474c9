"""Another viewer's read of a current snapshot: the owner's bytes, a refusal, or their own view.

A focus-context snapshot holds its owner's view (service.viewers). Another user's read of it, on
Doughnut's paths, gets one of three answers, and the verdict is remembered while access holds
(service.access: the access epoch, or the token TTL without change capture), keyed by the
snapshot as stored (note, generation, time of computation) and the viewer:

* **the same**: every viewer-dependent read behind the snapshot answers this viewer as it
  answered the owner (``same_view``), so the snapshot's bytes are this viewer's answer;
* **refused**: computed for this viewer, Doughnut refuses them the note;
* **their own view**: computed for this viewer at the snapshot's traversal limit, so that it
  answers every tokenLimit the snapshot answers. It is remembered in this process (never
  written to Redis, never under the owner's key) when every fact it read is a fact the owner's
  snapshot read too (``depends_on`` a subset). Then every row behind it is in the fact index
  under this note: an event on any of them outdates the snapshot (a new generation, another
  key), an access change moves the epoch, and a computation is a function of the rows and access
  decisions it read, so while neither moved the remembered view is what a computation now would
  give. A view that read beyond the owner's facts (the viewer's own notebooks linking in) is not
  covered by any invalidation and is computed on every read, sized for the asked tokenLimit.

So in steady state another viewer's read asks the database nothing: one cache read, and a replay
of the owner's or their own trace.
"""

from __future__ import annotations

from collections.abc import Callable

from graphrag.wiki.focus.types import NoteNotReadable
from graphrag.wiki.model import Viewer
from service.access import Remembered
from service.answers import Ask, envelope_body
from service.envelope import Envelope, SnapshotKey
from service.metrics import ReaderMetrics
from service.ports import NoteSource
from service.reader.live import LiveReads
from service.reader.served import Served, as_served
from service.viewers import same_view

__all__ = ["ViewerReads"]

#: the verdicts on another viewer's read of a snapshot (module docstring)
_SAME, _REFUSED, _OWN, _LIVE = "same", "refused", "own", "live"
#: own views kept in a process (parsed traces of tens of KB each; the least recently used goes)
MAX_OWN_VIEWS = 512

Verdict = tuple[SnapshotKey, int, int, Viewer]


class ViewerReads:
    """Serves another viewer's read of a current, fresh snapshot (module docstring)."""

    def __init__(self, source: NoteSource, live: LiveReads, metrics: ReaderMetrics, *,
                 epoch: Callable[[], int], clock_ms: Callable[[], int], ttl_ms: int | None) -> None:
        self.source, self.live, self.metrics = source, live, metrics
        self.verdicts: Remembered[str] = Remembered(epoch=epoch, clock_ms=clock_ms, ttl_ms=ttl_ms)
        self.views: Remembered[Envelope] = Remembered(epoch=epoch, clock_ms=clock_ms,
                                                      ttl_ms=ttl_ms, size=MAX_OWN_VIEWS)

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
        if verdict == _LIVE:
            self.metrics.viewer_live.inc()
            return self.live.compute(ask, write=False)
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
        self.metrics.viewer_live.inc()
        try:
            own = self.live.view(ask)
        except NoteNotReadable:
            self.verdicts.put(key, _REFUSED, epoch=epoch, at_ms=at_ms)
            raise
        if set(own.depends_on) <= set(envelope.depends_on):
            own.trace  # noqa: B018 (parsed here, in the route's thread, never by the hot read)
            self.views.put(key, own, epoch=epoch, at_ms=at_ms)
        else:
            self.verdicts.put(key, _LIVE, epoch=epoch, at_ms=at_ms)
        return as_served(envelope_body(own, ask), "live", own.computed_at_ms, own.computed_at_ms)


def _viewer_of(ask: Ask) -> Viewer:
    assert ask.viewer is not None  # (another viewer's read names one)
    return ask.viewer


def _key(envelope: Envelope, ask: Ask) -> Verdict:
    """Whose read of which snapshot as stored a verdict or a view is kept under."""
    return (ask.key, envelope.generation, envelope.computed_at_ms, _viewer_of(ask))
