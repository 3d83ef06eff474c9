"""Phase 1 of a generated Doughnut-2026 database: who owns what, where each note lives, its title,
kind and fate (see :mod:`ops.generate_wiki` for the shape it imitates and phase 2, the rows).

Deterministic per ``random.Random``: every choice is drawn in id order from the one generator the
caller passes, so a seed gives the same plan on every machine.
"""

from __future__ import annotations

import calendar
import datetime as dt
import itertools
import random
from array import array

__all__ = [
    "CJK", "COMMON_TITLES", "EPOCH", "FILLED", "NULL", "RELATION", "START", "START_MS", "Plan",
    "pick_word", "prose_pool",
]

END = dt.datetime(2026, 6, 30)
START = END - dt.timedelta(days=5 * 365 + 1)
_SPAN_S = int((END - START).total_seconds())
END_MS = calendar.timegm(END.timetuple()) * 1000
START_MS = calendar.timegm(START.timetuple()) * 1000
EPOCH = dt.datetime(1970, 1, 1)
_NOTES_PER_BOOK = 2_000



def _split(words: str) -> tuple[str, ...]:
    return tuple(words.split())


PLAIN, RELATION, HUB = 0, 1, 2
FILLED, NULL, EMPTY = 0, 1, 2
_WORDS = _split(
    "graph context note token budget parent child sibling link target inbound review memory spaced "
    "repetition recall question answer concept theorem proof example lemma chapter vocabulary grammar "
    "verb noun python java spring mysql redis index query cache snapshot webhook layer wave focus "
    "doughnut notebook circle assessment quiz habit garden seed root branch leaf river mountain "
    "algorithm complexity recursion iterator closure monad functor category set map reduce filter "
    "kernel thread mutex socket packet router latency entropy gradient tensor matrix vector")
CJK = _split("学習 笔记 知识 图谱 记忆 复习 概念 关系 例子 問題 日本語 漢字 勉強 データ ノート 構造 "
              "한국어 공부 문법 단어 甜甜圈 上下文 兄弟 出汁 味噌 数学 物理")
_RTL = ("שלום", "ספר", "مرحبا", "كتاب")
_EMOJI = ("🍩", "📚", "🧠", "✅", "🚀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️", "🤔", "🔗", "✨")
COMMON_TITLES = ("Overview", "Summary", "Introduction", "Examples", "Open Questions", "TODO")
_FOLDER_WORDS = _split("Basics Advanced Archive Inbox Projects Reading Lectures Exercises Drafts Ideas "
                       "Chapter Week Module Unit Topics Reference Glossary Practice Review")
_BOOK_TOPICS = ("Computer Science", "日本語", "Mathematics 📐", "Physics", "Cooking", "History",
                "Spanish", "Music Theory", "Biology", "Philosophy", "한국어", "Economics")
_RELATIONS = ("related to", "a specialization of", "an application of", "an instance of", "a part of",
              "tagged by", "an attribute of", "the opposite of", "author of", "using", "an example of",
              "before", "similar to", "confused with")


def _scaled(n: int, at_100k: int, slope: float) -> int:
    """``at_100k`` at 100k notes, proportional below, growing by ``slope`` per note above."""
    return at_100k * n // 100_000 if n <= 100_000 else int(at_100k + (n - 100_000) * slope)


def pick_word(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.72:
        return rng.choice(_WORDS)
    return rng.choice(CJK) if r < 0.9 else rng.choice(_RTL) if r < 0.93 else rng.choice(_EMOJI)


def prose_pool(rng: random.Random, chars: int = 150_000) -> str:
    """Paragraphs of mixed scripts; note bodies are slices of it (it holds no link syntax)."""
    parts, size = [], 0
    while size < chars:
        words = [pick_word(rng) for _ in range(rng.randint(5, 40))]
        style = rng.random()
        para = (f"# {' '.join(words)}" if style < 0.1 else "\n".join(f"- {w}" for w in words[:6])
                if style < 0.2 else f"**{words[0]}** {' '.join(words[1:])}")
        parts.append(para)
        size += len(para) + 2
    return "\n\n".join(parts)


class Plan:
    """Phase 1, in id order: who owns what, where each note lives, its title, kind and fate."""

    def __init__(self, n: int, rng: random.Random) -> None:
        self.n, self.rng = n, rng
        self.books = max(min(n, 3), round(n / _NOTES_PER_BOOK))  # several, even when small
        self.notebook = array("i", [0]) * (n + 1)
        self.folder = array("i", [0]) * (n + 1)
        self.created_s = array("q", [0]) * (n + 1)
        self.deleted_ms = array("q", [0]) * (n + 1)
        self.kind, self.fill = bytearray(n + 1), bytearray(n + 1)
        self.titles: list[str] = [""] * (n + 1)
        self.endpoints: dict[int, tuple[int, int, str]] = {}
        self.book_notes = [array("i") for _ in range(self.books + 1)]
        self.folders: list[tuple[int, int | None, str, int]] = []  # notebook, parent, name, created_s
        self._taken: list[set[str]] = [set() for _ in range(self.books + 1)]
        self._folder_names: set[tuple[int, int, str]] = set()
        self._common: set[tuple[int, int, str]] = set()
        self._placed: list[list[int]] = [[] for _ in range(self.books + 1)]
        self.monster_of: dict[int, int] = {}
        self.hub_of: dict[int, list[int]] = {}

    def build(self) -> Plan:
        self._people()
        monsters = self._monsters()
        for i in range(1, self.n + 1):
            self._place(i, monsters)
        self._hubs()
        self._delete()
        return self

    # -- people and notebooks -----------------------------------------------------------------
    def _people(self) -> None:
        rng, books = self.rng, self.books
        self.users = max(2, (books + 1) // 2)
        self.circles = max(1, books // 20)
        self.members = [sorted(rng.sample(range(1, self.users + 1), min(self.users, rng.randint(2, 5))))
                        for _ in range(self.circles)]
        circle_books = set(rng.sample(range(2, books + 1), min(books - 1, self.circles)))
        self.owner = [0] + [-(1 + rng.randrange(self.circles)) if b in circle_books
                            else 1 + (b - 1) % self.users for b in range(1, books + 1)]  # <0: a circle
        self.bazaar = set(rng.sample(range(1, books + 1), max(1, books // 20)))
        self.subscriptions = sorted({(u, b) for u in range(1, self.users + 1)
                                     for b in rng.sample(range(1, books + 1), min(books, 2))
                                     if self.owner[b] != u})
        self.names = self._book_names()

    def _book_names(self) -> list[str]:
        names = [""]
        for b in range(1, self.books + 1):
            topic = _BOOK_TOPICS[(b - 1) % len(_BOOK_TOPICS)]
            names.append(topic if b <= len(_BOOK_TOPICS) else f"{topic} {b}")
        return names

    def saver(self, book: int) -> int:
        """Who saves this notebook's notes: its owner, or the first member of its circle."""
        owner = self.owner[book]
        return owner if owner > 0 else self.members[-owner - 1][0]

    def readable(self, user: int) -> set[int]:
        circles = {-(c + 1) for c, members in enumerate(self.members) if user in members}
        owned = {b for b in range(1, self.books + 1)
                 if self.owner[b] == user or self.owner[b] in circles}
        return owned | {b for u, b in self.subscriptions if u == user} | self.bazaar

    # -- placing notes ------------------------------------------------------------------------
    def _monsters(self) -> dict[int, int]:
        """Monster folders: members drawn among all notes, each folder in its own notebook."""
        base = _scaled(self.n, 5_100, 0.004)
        sizes = [s for s in (base, base * 11 // 10, base * 12 // 10) if s > 0]
        books = self.rng.sample(range(1, self.books + 1), min(self.books, len(sizes)))
        folders = {}
        for size, book in zip(sizes, books, strict=False):
            name = self.rng.choice(("Inbox", "Imported", "Vocabulary"))
            folder = self._new_folder(book, None, 0, name=name)
            folders[folder] = size
        pool = self.rng.sample(range(2, self.n + 1), min(self.n - 1, sum(folders.values())))
        it = iter(pool)
        return {i: f for f, size in folders.items() for i in itertools.islice(it, size)}

    def _new_folder(self, book: int, parent: int | None, created_s: int, name: str | None = None) -> int:
        name = name or self.rng.choice(_FOLDER_WORDS)
        base, k = name, 1
        while (book, parent or 0, name.lower()) in self._folder_names:
            k += 1
            name = f"{base} {k}"
        self._folder_names.add((book, parent or 0, name.lower()))
        self.folders.append((book, parent, name, max(0, created_s - 60)))
        return len(self.folders)

    def _place(self, i: int, monsters: dict[int, int]) -> None:
        rng = self.rng
        self.created_s[i] = (i - 1) * _SPAN_S // self.n + rng.randrange(max(1, _SPAN_S // self.n))
        if i in monsters:
            folder = monsters[i]
            book = self.folders[folder - 1][0]
        else:
            book = 1 + (i - 1) * self.books // self.n
            if rng.random() < 0.05:
                book = 1 + rng.randrange(book)  # a late addition to an older notebook
            folder = self._pick_folder(book, i)
        self.notebook[i], self.folder[i] = book, folder
        self.fill[i] = NULL if rng.random() < 0.03 else EMPTY if rng.random() < 0.01 else FILLED
        prior = len(self.book_notes[book])
        if prior >= 2 and rng.random() < 0.2:
            self._relationship(i, book, prior)
        else:
            self.titles[i] = self._title(book, folder)
        self.book_notes[book].append(i)

    def _pick_folder(self, book: int, i: int) -> int:
        rng, placed = self.rng, self._placed[book]
        if rng.random() < 0.1:
            return 0
        if not placed or rng.random() < 1 / 12:
            parent = None
            if placed and rng.random() < 0.6:
                parent = placed[rng.randrange(len(placed))]
                parent = parent if self._depth(parent) < 6 else None
            folder = self._new_folder(book, parent, self.created_s[i])
        else:
            folder = placed[rng.randrange(len(placed))]  # preferential: by current size
        placed.append(folder)
        return folder

    def _depth(self, folder: int | None) -> int:
        depth = 0
        while folder:
            folder, depth = self.folders[folder - 1][1], depth + 1
        return depth

    def _unique(self, book: int, title: str) -> str:
        base, k = title[:140], 1
        while title.lower() in self._taken[book]:
            k += 1
            title = f"{base} ({k})"
        self._taken[book].add(title.lower())
        return title

    def _title(self, book: int, folder: int) -> str:
        rng = self.rng
        if rng.random() < 0.03:
            common = rng.choice(COMMON_TITLES)
            key = (book, folder, common)
            if key not in self._common:  # repeated across folders, never within one
                self._common.add(key)
                return common
        count = 1 + min(int(rng.paretovariate(1.6)), 30)
        words = " ".join(pick_word(rng) for _ in range(count))[:150].strip()
        return self._unique(book, words or "untitled")

    def _relationship(self, i: int, book: int, prior: int) -> None:
        rng, ids = self.rng, self.book_notes[book]
        source = ids[prior - 1 - rng.randrange(min(prior, 200))]
        target = ids[rng.randrange(prior)]
        while target == source:
            target = ids[rng.randrange(prior)]
        relation = rng.choice(_RELATIONS)
        self.kind[i], self.fill[i] = RELATION, FILLED
        self.endpoints[i] = (source, target, relation)
        composed = f"{self.titles[source]} {relation} {self.titles[target]}"  # as the app names them
        self.titles[i] = self._unique(book, composed[:150].strip())

    # -- hubs and deletions -------------------------------------------------------------------
    def _hubs(self) -> None:
        rng, n = self.rng, self.n
        base = _scaled(n, 1_150, 0.0012)
        sizes = [s for s in (base, base * 5 // 4, base * 3 // 2, base * 2 if n >= 500_000 else 0) if s]
        early = [i for i in range(1, min(n, max(2, n // 40)) + 1)
                 if self.kind[i] == PLAIN and self.fill[i] == FILLED]
        for hub, size in zip(rng.sample(early, min(len(early), len(sizes))), sizes, strict=False):
            self.kind[hub] = HUB
            self.bazaar.add(self.notebook[hub])
            later = [i for i in rng.sample(range(hub + 1, n + 1), min(n - hub, size * 2))
                     if self.kind[i] == PLAIN and self.fill[i] == FILLED]
            for referrer in later[:size]:
                self.hub_of.setdefault(referrer, []).append(hub)

    def _delete(self) -> None:
        rng, n = self.rng, self.n
        for i in rng.sample(range(1, n + 1), n // 50):
            if self.kind[i] != HUB:
                after_s = rng.randrange(3_600, 90 * 86_400)
                stamp = START_MS + (self.created_s[i] + after_s) * 1000 + rng.randrange(1000)
                self.deleted_ms[i] = max(min(stamp, END_MS), START_MS + self.created_s[i] * 1000 + 1)
