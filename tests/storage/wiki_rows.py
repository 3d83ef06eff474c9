"""An in-memory wiki graph (tests/wiki_support.py) as Doughnut 2026 table rows, and random graphs.

Link rows to notes that do not exist are dropped from the graph first: Doughnut's foreign key
removes them when a note is hard-deleted, so a database can never hold them.
"""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

from tests.wiki_support import H, WikiGraph

__all__ = ["random_graph", "table_rows"]

_EPOCH = dt.datetime(1970, 1, 1)
BODIES = [None, "", "short", H + "body", "x" * 300, "é" * 500, "中" * 400, "😀" * 100 + "tail",
          "a😀" * 200, "z" * 2000, " \n ", "y" * 8000, H + "a `code` and ``` fences"]


def _moment(ms: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(milliseconds=ms)


def table_rows(graph: WikiGraph) -> dict[str, list[dict[str, Any]]]:
    """The graph's rows per 2026 table (dangling link rows dropped from the graph too)."""
    graph.rows[:] = [row for row in graph.rows if row[2] in graph.notes]
    users = {1, 2, *(u for members in graph.circles.values() for u in members)}
    rows: dict[str, list[dict[str, Any]]] = {
        "user": [{"id": u, "name": f"user {u}"} for u in sorted(users)],
        "circle": [{"id": c, "name": f"circle {c}"} for c in sorted(graph.circles)],
        "circle_user": [{"circle_id": c, "user_id": u} for c, members in sorted(graph.circles.items())
                        for u in sorted(members)],
    }
    rows["ownership"] = [{"id": nb.id, "user_id": nb.owner.user_id, "circle_id": nb.owner.circle_id}
                         for nb in graph.notebooks.values()]
    rows["notebook"] = [{"id": nb.id, "name": nb.name, "ownership_id": nb.id, "creator_id": 1}
                        for nb in graph.notebooks.values()]
    rows["subscription"] = [{"user_id": u, "notebook_id": nb} for u, nb in sorted(graph.subscriptions)]
    rows["bazaar_notebook"] = [{"notebook_id": nb} for nb in sorted(graph.bazaar)]
    rows["folder"] = [{"id": f.id, "notebook_id": f.notebook_id, "parent_folder_id": f.parent_folder_id,
                       "name": f.name} for f in graph.folders.values()]
    rows["note"] = [{"id": n.id, "notebook_id": n.notebook_id, "folder_id": n.folder_id,
                     "title": n.title, "content": n.content, "created_at": _moment(n.created_at_ms),
                     "deleted_at": _moment(n.created_at_ms + 1000) if n.deleted else None}
                    for n in graph.notes.values()]
    rows["note_wiki_title_cache"] = [{"id": rid, "note_id": note, "target_note_id": target,
                                      "link_text": f"L{rid}"} for rid, note, target in graph.rows]
    return rows


def random_graph(seed: int, notes: int = 40) -> WikiGraph:
    """Notebooks of two users and a circle, nested folders, deleted notes, cross-notebook links,
    subscriptions, bazaar entries, a hub and a crowded folder."""
    rng = random.Random(seed)
    graph = WikiGraph()
    graph.circles[1] = {1, 2} if rng.random() < 0.5 else {1}
    books = [graph.notebook("NB1", user=1), graph.notebook("NB2", user=2),
             graph.notebook("NB3", circle=1)]
    graph.subscriptions |= {(1, 2)} if rng.random() < 0.7 else set()
    graph.bazaar |= {3} if rng.random() < 0.5 else set()
    for i in range(6):
        book = rng.choice(books)
        parents = [f for f, folder in graph.folders.items() if folder.notebook_id == book]
        graph.folder(book, f"F{i}", rng.choice([None, *parents]))
    for i in range(1, notes + 1):
        book = books[0] if i == 1 else rng.choice([*books * 6, None])
        folders = [f for f, folder in graph.folders.items() if folder.notebook_id == book]
        folder = rng.choice([None, *folders, *folders[:1] * 4])
        graph.note(f"N{i}", book, folder, rng.choice(BODIES), deleted=i > 1 and rng.random() < 0.1)
    for i in range(1, notes + 1):
        graph.link(i, *(rng.randint(1, notes) for _ in range(rng.choice([0, 1, 2, 3, 6]))))
        if rng.random() < 0.3:
            graph.link(i, 2)  # a hub
    return graph
