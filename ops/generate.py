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
"""

from __future__ import annotations

import argparse
import calendar
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
from storage.database import Database, open_engine, reason
from storage.profiles import admin_2025
from storage.profiles.doughnut_2025 import Doughnut2025
from storage.records import TreeNote

__all__ = ["TableNotEmpty", "generate", "load", "main"]

END = dt.datetime(2026, 6, 30)
START = END - dt.timedelta(days=5 * 365 + 1)
_SPAN_S = int((END - START).total_seconds())
_START_EPOCH_S = calendar.timegm(START.timetuple())
_EPOCH = dt.datetime(1970, 1, 1)
_END_MS = calendar.timegm(END.timetuple()) * 1000
CHUNK = 5_000

_PLAIN, _HEAD, _LINK, _MONSTER_CHILD = 0, 1, 2, 3
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


def _scaled(n: int, at_100k: int, slope: float) -> int:
    """``at_100k`` at 100k notes, proportional below, growing by ``slope`` per note above."""
    if n <= 100_000:
        return at_100k * n // 100_000
    return int(at_100k + (n - 100_000) * slope)


def _monster_sizes(n: int) -> list[int]:
    base = _scaled(n, 5_200, 0.005)
    sizes = [base, base * 13 // 10] + ([base * 16 // 10] if n >= 500_000 else [])
    return [s for s in sizes if s > 0]


def _hub_sizes(n: int) -> list[int]:
    base = _scaled(n, 1_150, 0.0012)
    sizes = [base, base * 5 // 4, base * 3 // 2] + ([base * 2] if n >= 500_000 else [])
    return [s for s in sizes if s > 0]


def _capacity(rng: random.Random) -> int:
    """Planned number of children: 40% leaves, the rest Pareto-distributed (power law)."""
    if rng.random() < 0.4:
        return 0
    return min(int(rng.paretovariate(1.2)), 400)


def _assign(rng: random.Random, owners: Sequence[int], sizes: Sequence[int],
            candidates: list[int]) -> dict[int, int]:
    """Map ``sum(sizes)`` members drawn from ``candidates`` to their owners, ``sizes[k]`` each."""
    labels = [o for o, s in zip(owners, sizes, strict=False) for _ in range(s)]
    members = rng.sample(candidates, min(len(labels), len(candidates)))
    rng.shuffle(labels)
    return dict(zip(members, labels, strict=False))


class _Forest:
    """The structure of ``n`` notes: kinds, parents, targets, notebooks and deletion stamps."""

    def __init__(self, n: int, rng: random.Random) -> None:
        self.n, self.rng = n, rng
        self.kinds = bytearray(n + 1)
        self.parent = array("i", [0]) * (n + 1)
        self.target = array("i", [0]) * (n + 1)
        self.notebook = array("i", [0]) * (n + 1)
        self.deleted_ms = array("q", [0]) * (n + 1)
        self.monster_of: dict[int, int] = {}
        self.hub_of: dict[int, int] = {}
        self.special: set[int] = set()
        self.nodes = array("i")  # non-link notes so far: subjects and targets of links
        self.slots: list[int] = []  # the current notebook's free child slots, one entry per slot
        self.head = self.notebooks = 0

    def build(self) -> _Forest:
        self._plan_kinds()
        for i in range(1, self.n + 1):
            self._grow(i)
        self._delete()
        return self

    # -- planning -----------------------------------------------------------------------------
    def _plan_kinds(self) -> None:
        n, rng = self.n, self.rng
        heads = [1, *rng.sample(range(2, n + 1), min(n - 1, max(0, round(n / 2000) - 1)))]
        for h in heads:
            self.kinds[h] = _HEAD
        monsters, hubs = self._pick_specials(len(_monster_sizes(n)), len(_hub_sizes(n)))
        self._plan_monster_children(monsters)
        share = n / max(1, n - sum(_monster_sizes(n)))
        for i in range(3, n + 1):
            if self.kinds[i] == _PLAIN and i not in self.special and rng.random() < 0.2 * share:
                self.kinds[i] = _LINK
        self._plan_hub_referrers(hubs)

    def _pick_specials(self, n_monsters: int, n_hubs: int) -> tuple[list[int], list[int]]:
        early = [i for i in range(2, min(self.n, max(3, self.n // 40)) + 1) if self.kinds[i] == _PLAIN]
        picked = self.rng.sample(early, min(len(early), n_monsters + n_hubs))
        self.special.update(picked)
        return picked[:n_monsters], picked[n_monsters:]

    def _plan_monster_children(self, monsters: list[int]) -> None:
        if not monsters:
            return
        after = max(monsters) + 1
        candidates = [i for i in range(after, self.n + 1) if self.kinds[i] == _PLAIN]
        self.monster_of = _assign(self.rng, monsters, _monster_sizes(self.n), candidates)
        for i in self.monster_of:
            self.kinds[i] = _MONSTER_CHILD

    def _plan_hub_referrers(self, hubs: list[int]) -> None:
        if not hubs:
            return
        after = max(hubs) + 1
        links = [i for i in range(after, self.n + 1) if self.kinds[i] == _LINK]
        self.hub_of = _assign(self.rng, hubs, _hub_sizes(self.n), links)

    # -- growing, in id order -----------------------------------------------------------------
    def _grow(self, i: int) -> None:
        kind = self.kinds[i]
        if kind == _LINK:
            self._link(i)
            return
        if kind == _HEAD:
            self.head, self.slots, self.notebooks = i, [], self.notebooks + 1
            self.notebook[i] = self.notebooks
        elif kind == _MONSTER_CHILD:
            self._attach(i, self.monster_of[i])
        elif self.rng.random() < 0.03:  # an addition to an older note, maybe in another notebook
            self._attach(i, self.nodes[self.rng.randrange(len(self.nodes))])
        else:
            self._attach(i, self._take_slot())
        self.nodes.append(i)
        if self.notebook[i] == self.notebooks:  # slots only for the current notebook
            self.slots.extend([i] * ((5 if kind == _HEAD else 0) + _capacity(self.rng)))

    def _take_slot(self) -> int:
        """A free child slot of the current notebook (so fan-out follows capacity), else its head."""
        rng, slots = self.rng, self.slots
        if not slots:
            return self.head
        j = rng.randrange(len(slots))
        chosen, slots[j] = slots[j], slots[-1]
        slots.pop()
        return chosen

    def _attach(self, i: int, parent: int) -> None:
        self.parent[i] = parent
        self.notebook[i] = self.notebook[parent]

    def _link(self, i: int) -> None:
        subject, target = self._recent_or_any(300, 0.7), self.hub_of.get(i)
        if target is None:
            target = self._recent_or_any(2000, 0.55)
            if self.rng.random() < 0.05:
                target = self.rng.randrange(1, i)  # any earlier note, link notes included
        while subject == target:  # links start at id 3, so another non-link note exists
            subject = self.nodes[self.rng.randrange(len(self.nodes))]
        self._attach(i, subject)
        self.target[i] = target

    def _recent_or_any(self, window: int, recent: float) -> int:
        rng, nodes = self.rng, self.nodes
        if rng.random() < recent:
            return nodes[len(nodes) - 1 - rng.randrange(min(window, len(nodes)))]
        return nodes[rng.randrange(len(nodes))]

    # -- soft deletion ------------------------------------------------------------------------
    def _reach(self) -> tuple[array[int], array[int]]:
        """Per note: how many notes deleting it would stamp (capped), and the highest id among them."""
        cost, last = array("i", [1]) * (self.n + 1), array("i", range(self.n + 1))
        for i in range(self.n, 0, -1):
            for up in (self.parent[i], self.target[i]):
                if up:
                    cost[up] = min(cost[up] + cost[i], 1 << 30)
                    last[up] = max(last[up], last[i])
        return cost, last

    def _delete(self) -> None:
        roots = self._deletion_roots()
        parent, target, stamp = self.parent, self.target, self.deleted_ms
        for i in range(1, self.n + 1):
            if stamp[parent[i]]:
                stamp[i] = stamp[parent[i]]
            elif i in roots:
                stamp[i] = roots[i]
            elif stamp[target[i]]:
                stamp[i] = stamp[target[i]]

    def _deletion_roots(self) -> dict[int, int]:
        n, rng = self.n, self.rng
        if n < 2:
            return {}
        cost, last = self._reach()
        goal, cap, covered = n // 50, max(12, n // 400), 0
        roots: dict[int, int] = {}
        for _ in range(100 + 20 * goal):
            if covered >= goal:
                break
            i = rng.randrange(2, n + 1)
            if self.kinds[i] == _HEAD or i in self.special or cost[i] > cap:
                continue
            if cost[i] == 1 and rng.random() < 0.7:
                continue  # prefer real subtrees to single leaves
            roots[i], covered = self._stamp_after(last[i]), covered + cost[i]
        return roots

    def _stamp_after(self, last_id: int) -> int:
        """A deletion time (epoch ms) later than the creation of note ``last_id``."""
        seconds = _base_s(last_id + 1, self.n) + self.rng.randrange(60, 60 * 86_400)
        return min((_START_EPOCH_S + seconds) * 1000 + self.rng.randrange(1000), _END_MS)


def _base_s(i: int, n: int) -> int:
    """Seconds after START at which note ``i`` of ``n`` is created, before its jitter."""
    return (i - 1) * _SPAN_S // n


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

    def __init__(self, forest: _Forest, rng: random.Random) -> None:
        self.f, self.rng, self.n = forest, rng, forest.n
        self.pool = _text_pool(rng)
        self.last_order = array("q", [0]) * (forest.n + 1)
        self.creators = {0: 1}

    def rows(self) -> Iterator[TreeNote]:
        for i in range(1, self.n + 1):
            yield self._row(i)

    def _row(self, i: int) -> TreeNote:
        f, rng = self.f, self.rng
        created_s = _base_s(i, self.n) + rng.randrange(max(1, _SPAN_S // self.n))
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
        order = ((_START_EPOCH_S + created_s) * 1000 + rng.randrange(1000)) * 1000
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
        return START + dt.timedelta(seconds=created_s + int(rng.random() ** 3 * (_SPAN_S - created_s)))

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
    forest = _Forest(notes, rng).build()
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
