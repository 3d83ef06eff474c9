"""Token counters: what a note costs against a tokenLimit (docs/doughnut.md, docs/algorithms.md).

A note's cost is measured on exactly the compact JSON emitted for it. The tiktoken counter takes an
already-built ``encode_ordinary`` function: loading the encoding file is I/O and happens in storage.

A count is a pure function of the bytes, so :class:`MemoCounter` may keep it for as long as it likes:
unlike the rows a computation reads, a memo keyed by the exact bytes can never be stale, whatever was
edited since. It spares the encoder the notes a process has costed before (a drain after every edit,
the nightly run in a long-lived worker); it holds the bytes themselves as keys, so no two texts share
an entry, and it forgets the least recently used beyond ``max_entries``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Protocol

from graphrag.core.errors import ConfigurationError

__all__ = [
    "COUNTER_NAMES",
    "CharsCounter",
    "MemoCounter",
    "OnePerNoteCounter",
    "TiktokenCounter",
    "TokenCounter",
    "adds_up_around_words",
]

COUNTER_NAMES = ("tiktoken", "chars", "one-per-note")


class TokenCounter(Protocol):
    """Counts the tokens of one note's compact JSON."""

    @property
    def name(self) -> str: ...

    def count(self, note_json: bytes) -> int: ...


def adds_up_around_words(counter: TokenCounter) -> bool:
    """Whether ``counter`` counts ``head + word + tail`` as the three counts added, where ``head``
    ends with the three characters ``":"``, ``word`` is ASCII letters only and ``tail`` starts
    with ``"`` then ``,`` or ``}`` (a JSON string member's value, cut out of compact JSON).

    True of tiktoken: cl100k_base cuts the text into pre-tokens with a regular expression and
    encodes each alone, and that expression cuts at both ends of such a word in any context. At
    the head's last ``":"`` the letter-run rule (one optional non-letter, then letters) fails on
    the ``:``, so the punctuation rule takes the three characters and stops at the word, whatever
    the word is; the word starts with a letter, so it is one letter run that stops at the ``"``;
    the tail's ``"`` is again followed by punctuation, so it opens a punctuation run as it would
    alone. No pre-token spans a cut, so the counts add up (tests/unit/test_tokens.py checks it
    on random notes). False of the estimators: ``chars`` rounds each count up, ``one-per-note``
    counts notes."""
    return counter.name == "tiktoken"


@dataclass(frozen=True)
class CharsCounter:
    """Doughnut's production estimator: ceil(UTF-8 bytes / 3.75)."""

    name: str = "chars"

    def count(self, note_json: bytes) -> int:
        return -(-len(note_json) * 4 // 15)


@dataclass(frozen=True)
class OnePerNoteCounter:
    """Doughnut's test counter: every note, focus included, costs 1."""

    name: str = "one-per-note"

    def count(self, note_json: bytes) -> int:
        return 1


@dataclass(frozen=True)
class TiktokenCounter:
    """cl100k_base tokens of the JSON text, special-token look-alikes counted as plain text."""

    encode_ordinary: Callable[[str], Sequence[int]]
    name: str = "tiktoken"

    def count(self, note_json: bytes) -> int:
        return len(self.encode_ordinary(note_json.decode("utf-8")))


@dataclass(frozen=True)
class MemoCounter:
    """``inner``'s counts, remembered per exact bytes for the ``max_entries`` most recently used
    (thread-safe: functools' LRU cache); its name is ``inner``'s, so a snapshot's configHash is
    the same with or without it."""

    inner: TokenCounter
    max_entries: int
    _count: Callable[[bytes], int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_entries < 1:
            raise ConfigurationError(f"a token memo holds at least 1 entry, not {self.max_entries}")
        object.__setattr__(self, "_count", lru_cache(maxsize=self.max_entries)(self.inner.count))

    @property
    def name(self) -> str:
        return self.inner.name

    def count(self, note_json: bytes) -> int:
        return self._count(note_json)

    def entries(self) -> int:
        """How many counts are remembered now."""
        return int(self._count.cache_info().currsize)  # type: ignore[attr-defined]
