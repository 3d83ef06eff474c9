"""An in-memory Doughnut 2026 database that answers every WikiNeed as the SQL would.

The rules are written out here from Doughnut's queries, independently of the code under test:

* ``referrers``: distinct, non-deleted notes with a ``note_wiki_title_cache`` row targeting the note,
  visible when in the target's notebook, or when the viewer owns their notebook through
  ``ownership.user_id`` or subscribes to it; in sampling order (:func:`graphrag.wiki.model.sample_key`,
  checked against MySQL's CRC32 in the tests); the rows the view lacks are read after the lists,
  as the profile reads them;
* ``peers``: non-deleted notes with the folder id (any notebook), or at the notebook's root;
* ``links``: the targets of the note's rows in row-id order (the target rows the view lacks are read
  in the same load, unless ``eager_links`` is off);
* ``access``: readable = owner, circle member, subscriber or bazaar; inbound-visible = owner through
  ``ownership.user_id`` or subscriber. A circle viewer is a member of that circle owning nothing else.

Every need the loader answers is recorded in :attr:`WikiGraph.asked`, so tests can count rounds.
"""

from __future__ import annotations

import zlib
from collections.abc import Generator
from typing import Any, TypeVar

import orjson

from graphrag.core.batch import run_batch
from graphrag.wiki.focus.context import (
    FocusContextParams,
    FocusContextResult,
    FocusRequest,
    RelatedNoteOut,
    Trace,
    focus_context,
    trace,
)
from graphrag.wiki.model import WikiNeed
from graphrag.wiki.view import WikiView
from storage.memory_wiki import MemoryWiki

T = TypeVar("T")
DAY_MS = 86_400_000
H = "---\ntype: Note\n---\n"  # the frontmatter Doughnut adds to every saved body
OWNER = 1
OTHER = 2
BASE_MS = 1_785_571_200_000  # 2026-08-01T08:00:00Z


#: The in-memory database lives in the product now (the wiki model's fast twin of the SQL profile).
WikiGraph = MemoryWiki


def drive(graph: WikiGraph, job: Generator[WikiNeed, None, T], view: WikiView | None = None) -> T:
    """Run one computation against ``graph`` through the batch driver; its error is raised."""
    view = view or WikiView()
    outcome = run_batch({0: job}, view, graph.loader(view))[0]  # type: ignore[dict-item, arg-type]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome  # type: ignore[return-value]


def result_of(
    graph: WikiGraph, focus_id: int, token_limit: int = 2000, **request: Any
) -> FocusContextResult:
    params = request.pop("params", FocusContextParams())
    view = WikiView()
    job = focus_context(view, params, FocusRequest(focus_id, token_limit=token_limit, **request))
    return drive(graph, job, view)


def trace_of(graph: WikiGraph, focus_id: int, max_token_limit: int = 2000, **request: Any) -> Trace:
    params = request.pop("params", FocusContextParams())
    req = FocusRequest(
        focus_id, token_limit=min(1, max_token_limit), max_token_limit=max_token_limit, **request
    )
    view = WikiView()
    return drive(graph, trace(view, params, req), view)


# -- reading results ---------------------------------------------------------------------------------
def titles(result: FocusContextResult) -> list[str]:
    return [n.title for n in result.related_notes]


def wiki_notes(result: FocusContextResult) -> list[RelatedNoteOut]:
    """Wiki-reached: the path ends at the note."""
    return [n for n in result.related_notes if len(n.retrieval_path) == n.depth + 1]


def peer_notes(result: FocusContextResult) -> list[RelatedNoteOut]:
    """Folder peers: the path ends at the anchor."""
    return [n for n in result.related_notes if len(n.retrieval_path) == n.depth]


def by_title(result: FocusContextResult, title: str) -> RelatedNoteOut:
    return next(n for n in result.related_notes if n.title == title)


def one_notebook() -> tuple[WikiGraph, int]:
    graph = WikiGraph()
    return graph, graph.notebook("NB", user=OWNER)


def crc(note_id: int, seed: int) -> int:
    """MySQL's ``CRC32(CONCAT(CAST(id AS CHAR), CAST(seed AS CHAR)))``."""
    return zlib.crc32(f"{note_id}{seed}".encode())


def format_2(trace: Trace) -> bytes:
    """The stored form before format 3, as that version wrote it: the ladder's steps inside the
    first line, then only the notes' lines."""
    ids = sorted(trace.notes)
    spine = {k: v for k, v in trace.to_json().items() if k != "notes"} | {
        "format": 2, "noteIds": ids, "noteCosts": [trace.notes[i].cost for i in ids],
        "noteGroups": [trace.notes[i].group for i in ids]}
    lines = [part for i in ids for part in trace.notes[i].fragments]
    spine["lineBytes"] = list(map(len, lines))
    return orjson.dumps(spine) + b"\n" + b"\n".join(lines)
