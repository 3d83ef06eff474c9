"""When another user's answer is the snapshot's: a proof by the reads that depend on the viewer.

A focus-context snapshot holds the view of the focus notebook's owner: its user, or for a notebook a
circle owns, the circle read as "a member with no notebooks or subscriptions of their own"
(graphrag.wiki.model). Doughnut computes every other reader's answer with that reader as viewer,
and the viewer enters the computation in exactly two kinds of read (graphrag.wiki.focus.walk):

* whether it may read a notebook (``Access.readable``): the focus's own, and the notebook of every
  link target the walk considered, kept or dropped; the snapshot's facts name each as
  ``notebook:N``;
* which referrers of a note it sees (``Access.inbound_visible`` and the parent's notebook), for every
  note whose referrers the walk read; the facts name each as ``inbound:T``.

Every other read (rows, links, folders, peers) is the same for everybody. So if every such read gives
the asked viewer the same answer it gave the snapshot's viewer, the two computations read the same
data, take the same decisions and produce the same bytes, for every tokenLimit the trace covers:
serving the snapshot to the asked viewer is then exactly Doughnut's answer to them. The check reads
the two viewers' access to those notebooks and the whole referrer list of each such note for both,
in one batch of queries (no traversal); any difference, or a referrer list too long to compare
cheaply, and the answer is computed live for the asked viewer instead (never stored: no viewer's
view is written under the owner's key). The snapshot must be current (its generation not below the
note's counter): then its facts are the ones a computation now would read.
"""

from __future__ import annotations

from collections.abc import Iterable

from graphrag.wiki.model import Viewer, WikiNeed
from graphrag.wiki.view import WikiView
from service.envelope import Fact
from service.ports import NoteSource

__all__ = ["MAX_COMPARED_REFERRERS", "same_view"]

#: A referrer list longer than this is not compared (a hub's thousands): the answer is computed live.
MAX_COMPARED_REFERRERS = 500


def _ids(facts: Iterable[Fact], kind: str) -> set[int]:
    prefix = f"{kind}:"
    return {int(f[len(prefix):]) for f in facts
            if isinstance(f, str) and f.startswith(prefix) and f[len(prefix):].isdigit()}


def same_view(source: NoteSource, facts: Iterable[Fact], held: Viewer, asked: Viewer) -> bool:
    """Whether every viewer-dependent read behind a snapshot of ``held``'s view (its ``facts``)
    answers ``asked`` the same; see the module docstring."""
    if asked == held:
        return True
    facts = list(facts)
    notebooks, targets = _ids(facts, "notebook"), _ids(facts, "inbound")
    viewers = (held, asked)
    length = MAX_COMPARED_REFERRERS + 1
    view = WikiView()
    need = WikiNeed.of(access={(v, n) for v in viewers for n in notebooks},
                       referrers={(t, None, v): length for t in targets for v in viewers})
    with source.batch() as load:
        load(view, need)
    if any(view.access(held, n).readable != view.access(asked, n).readable for n in notebooks):
        return False
    for target in targets:
        seen = [view.referrers((target, None, v), length) for v in viewers]
        if len(seen[0]) >= length or seen[0] != seen[1]:
            return False
    return True
