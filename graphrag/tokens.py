"""Token counters: what a note costs against a tokenLimit (docs/doughnut.md, docs/algorithms.md).

A note's cost is measured on exactly the compact JSON emitted for it. The tiktoken counter takes an
already-built ``encode_ordinary`` function: loading the encoding file is I/O and happens in storage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["COUNTER_NAMES", "CharsCounter", "OnePerNoteCounter", "TiktokenCounter", "TokenCounter"]

COUNTER_NAMES = ("tiktoken", "chars", "one-per-note")


class TokenCounter(Protocol):
    """Counts the tokens of one note's compact JSON."""

    @property
    def name(self) -> str: ...

    def count(self, note_json: bytes) -> int: ...


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
