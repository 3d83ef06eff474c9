"""Deterministic Doughnut-shaped ``note`` data and a fast bulk loader, for benchmarks and soak tests.

``generate(notes, seed)`` yields rows in id order (a parent always precedes its children; a link's
target always has a lower id). The shape imitates a real Doughnut database:

- notebooks of about 2,000 notes on average, each a nested tree under one head note (``parent_id`` NULL);
- power-law fan-out: most parents have 1-10 children, a few hundreds, plus 2-3 "monster parents" with
  5,000+ children at 100k notes (5-7% of the notes each below 100k, e.g. 520 and 676 at 10k);
- about 20% link notes (title ``":" + label``, ``target_note_id`` set, parent = the subject), a few of
  them aimed at 3-4 inbound-reference hubs with 1,000+ referrers each at 100k notes (1.1-1.7% of the
  notes each below);
- details from NULL or empty to several KB of markdown/HTML mixing ASCII, CJK and emoji;
- ``created_at`` rising with the id over the five years before 2026-06-30 (naive UTC, whole seconds);
- about 2% soft-deleted: whole subtrees plus the link notes pointing into them, one ``deleted_at`` each,
  never earlier than the creation of anything it covers;
- ``sibling_order`` in Doughnut's epoch-ms x 1000 style, with midpoint inserts, ties and a few negatives.

``load(engine, notes, seed)`` creates the table if needed and bulk-inserts the rows; ``main()`` is the
CLI: ``python -m ops.generate --db URL --notes 100000 --seed 0``.

Phase 1, the structure (kinds, parents, link targets, notebooks, deletion stamps), is
:class:`ops.tree_plan.Forest`; this module is phase 2, the rows (titles, details, times, orders), drawn
from the same generator right after it, and the loader and CLI.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import random
import sys
import time
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from tqdm import tqdm

from graphrag import GraphRagError, InvalidParameter
from ops.tree_plan import SPAN_S, START, START_EPOCH_S, Forest, base_s
from storage.database import Database, open_engine, reason
from storage.profiles import admin_2025
from storage.profiles.doughnut_2025 import Doughnut2025
from storage.records import TreeNote

__all__ = ["TableNotEmpty", "generate", "load", "main"]

_EPOCH = dt.datetime(1970, 1, 1)
CHUNK = 5_000

_LABELS = (
    ":a part of", ":an example of", ":related to", ":opposite of", ":used in", ":a specialization of",
    ":similar to", ":an application of", ":an instance of", ":tagged by", ":an attribute of",
    ":author of", ":before", ":confused with",
)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_LABEL_WEIGHTS = (20, 16, 18, 6, 10, 8, 6, 4, 4, 3, 2, 1, 1, 1)
_ASCII_WORDS = _words(
    "graph context note token budget parent child sibling link target inbound review memory spaced "
    "repetition recall question answer concept theorem proof example lemma chapter vocabulary grammar "
    "verb noun python java spring mysql redis index query cache snapshot webhook layer wave focus "
    "doughnut notebook circle assessment quiz habit garden seed root branch leaf river mountain "
    "algorithm complexity recursion iterator closure monad functor category set map reduce filter"
)
_CJK_WORDS = _words(
    "学习 笔记 知识 图谱 记忆 复习 概念 关系 例子 問題 日本語 漢字 勉強 データ ノート 構造 "
    "한국어 공부 문법 단어 甜甜圈 上下文 兄弟 父节点 子节点"
)
_EMOJI = ("🍩", "📚", "🧠", "✅", "🚀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️", "🤔", "🔗", "✨")


class TableNotEmpty(GraphRagError):
    """The ``note`` table already holds rows; the generator only fills an empty one."""


def _text_pool(rng: random.Random, chars: int = 200_000) -> str:
    """Markdown/HTML prose mixing ASCII, CJK and emoji; details are slices of it."""
    parts: list[str] = []
    size = 0
    while size < chars:
        words = [_word(rng) for _ in range(rng.randint(5, 40))]
        para = " ".join(words)
        style = rng.random()
        if style < 0.1:
            para = f"# {para}"
        elif style < 0.2:
            para = f"<p>{para}</p>"
        elif style < 0.3:
            para = "\n".join(f"- {w}" for w in words[:8])
        elif style < 0.35:
            para = f"[{words[0]}](https://doughnut.example/n{rng.randrange(1, 10**6)}) **{para}**"
        parts.append(para)
        size += len(para) + 2
    return "\n\n".join(parts)


def _word(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.7:
        return rng.choice(_ASCII_WORDS)
    return rng.choice(_CJK_WORDS) if r < 0.93 else rng.choice(_EMOJI)


_TITLE_WORDS = (*_ASCII_WORDS, *_ASCII_WORDS, *_CJK_WORDS, *_EMOJI)


class _Rows:
    """Turns a built forest into ``note`` rows: titles, details, times, orders, creators."""

    def __init__(self, forest: Forest, rng: random.Random) -> None:
        self.f, self.rng, self.n = forest, rng, forest.n
        self.pool = _text_pool(rng)
        self.last_order = array("q", [0]) * (forest.n + 1)
        self.creators = {0: 1}

    def rows(self) -> Iterator[TreeNote]:
        for i in range(1, self.n + 1):
            yield self._row(i)

    def _row(self, i: int) -> TreeNote:
        f, rng = self.f, self.rng
        created_s = base_s(i, self.n) + rng.randrange(max(1, SPAN_S // self.n))
        link = f.target[i] != 0
        stamp = f.deleted_ms[i]
        order = self._order(f.parent[i], created_s)
        title = self._label() if link else self._title()
        details = None if link and rng.random() < 0.8 else self._details()
        self._updated(created_s)  # keeps the random stream of earlier versions (the column is unread)
        self._creator(f.notebook[i])
        return TreeNote(
            id=i, title=title, parent_id=f.parent[i] or None, target_note_id=f.target[i] or None,
            sibling_order=order, details=details, created_at=START + dt.timedelta(seconds=created_s),
            deleted_at=_EPOCH + dt.timedelta(milliseconds=stamp) if stamp else None,
            notebook_id=f.notebook[i],
        )

    def _order(self, parent: int, created_s: int) -> int:
        """epoch-ms x 1000 of creation; sometimes a midpoint insert, a tie or a negative value."""
        rng = self.rng
        order = ((START_EPOCH_S + created_s) * 1000 + rng.randrange(1000)) * 1000
        previous, r = self.last_order[parent], rng.random()
        if previous and r < 0.20:
            if r < 0.10:
                order = previous - rng.randrange(1, 1 << 40)  # inserted before the last sibling
            elif r < 0.19:
                order = previous  # tie
            else:
                order = -rng.randrange(1, 10**15)
        self.last_order[parent] = order
        return order

    def _label(self) -> str:
        return self.rng.choices(_LABELS, _LABEL_WEIGHTS)[0]

    def _title(self) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.001:
            return ""
        if r < 0.011:
            start = rng.randrange(len(self.pool) - 200)
            title = self.pool[start : start + rng.randint(100, 150)].replace("\n", " ")
            return title.strip().lstrip(":")
        return " ".join(rng.choices(_TITLE_WORDS, k=1 + min(int(rng.paretovariate(1.6)), 12)))[:150]

    def _details(self) -> str | None:
        rng = self.rng
        r = rng.random()
        if r < 0.25:
            return None
        if r < 0.32:
            return ""
        if r < 0.82:
            length = rng.randint(1, 300)
        elif r < 0.975:
            length = rng.randint(300, 1500)
        else:
            length = rng.randint(2000, 6000)
        start = rng.randrange(len(self.pool) - length)
        return self.pool[start : start + length]

    def _updated(self, created_s: int) -> dt.datetime | None:
        rng = self.rng
        if rng.random() < 0.15:
            return None
        return START + dt.timedelta(seconds=created_s + int(rng.random() ** 3 * (SPAN_S - created_s)))

    def _creator(self, notebook: int) -> int:
        creator = self.creators.get(notebook)
        if creator is None:
            creator = self.creators[notebook] = 1 + self.rng.randrange(max(1, len(self.creators) // 4))
        return creator


def generate(notes: int, seed: int = 0) -> Iterator[TreeNote]:
    """Yield ``notes`` Doughnut-shaped notes in id order (1..notes); deterministic per seed."""
    if notes < 1:
        raise InvalidParameter("notes", "must be at least 1")
    rng = random.Random(seed)
    forest = Forest(notes, rng).build()
    yield from _Rows(forest, rng).rows()


class _Tally:
    """Counts over the loaded rows; children and inbound references count live notes only."""

    def __init__(self, n: int) -> None:
        self.notes = self.links = self.deleted = 0
        self.children = array("i", [0]) * (n + 1)
        self.inbound = array("i", [0]) * (n + 1)

    def add(self, rows: Iterable[TreeNote]) -> None:
        for row in rows:
            self.notes += 1
            target = row.target_note_id
            self.links += target is not None
            if row.deleted_at is not None:
                self.deleted += 1
                continue
            self.children[row.parent_id or 0] += row.parent_id is not None
            self.inbound[target or 0] += target is not None

    def counts(self, seconds: float) -> dict[str, Any]:
        return {
            "notes": self.notes, "links": self.links, "deleted": self.deleted,
            "max_children": max(self.children), "max_inbound": max(self.inbound),
            "seconds": round(seconds, 2),
        }


def _chunks(rows: Iterator[TreeNote], size: int) -> Iterator[list[TreeNote]]:
    while chunk := list(itertools.islice(rows, size)):
        yield chunk


def load(engine: Database, notes: int, seed: int = 0, *, progress: bool = True) -> dict[str, Any]:
    """Create ``note`` if missing and fill it (it must be empty) with ``generate(notes, seed)``.

    Rows go in chunks of ``CHUNK``, one executemany and one commit each. Returns the counts
    ``notes, links, deleted, max_children, max_inbound, seconds``.
    """
    if notes < 1:
        raise InvalidParameter("notes", "must be at least 1")
    admin_2025.create_tables(engine)
    if Doughnut2025(engine).any_note():
        raise TableNotEmpty("table 'note' is not empty; load into an empty database")
    started, tally = time.perf_counter(), _Tally(notes)
    show = progress and sys.stderr.isatty()
    with tqdm(total=notes, unit="note", unit_scale=True, disable=not show) as bar:
        for chunk in _chunks(generate(notes, seed), CHUNK):
            admin_2025.insert_notes(engine, chunk, chunk=CHUNK, bulk=True)
            tally.add(chunk)
            bar.update(len(chunk))
    return tally.counts(time.perf_counter() - started)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m ops.generate",
        description="Fill an empty Doughnut database with deterministic generated notes.",
    )
    parser.add_argument("--db", required=True, help="SQLAlchemy URL, e.g. mysql+pymysql://root@host/db")
    parser.add_argument("--notes", type=int, default=100_000, help="number of notes (default 100000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--schema", choices=("doughnut-2025", "doughnut-2026"), default="doughnut-2025",
                        help="table layout: the 2025 note tree (default) or today's folders and wiki "
                             "links (see ops.generate_wiki)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: load the notes and print the counts as one JSON line; one-line error, exit 1, on failure."""
    args = _parse(argv)
    loader = load
    if args.schema == "doughnut-2026":
        from ops.generate_wiki import load as loader
    try:
        counts = loader(open_engine(args.db), args.notes, args.seed, progress=not args.no_progress)
    except GraphRagError as err:
        print(f"error: {reason(err)}", file=sys.stderr)
        return 1
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
