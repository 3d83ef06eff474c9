"""Small helpers shared by the unit tests (pure functions over outcomes and the spec)."""

from __future__ import annotations

from hashlib import blake2b
from typing import Any

import orjson

from graphrag import Outcome


def spec_u(seed: int, purpose: str, key: int) -> float:
    """docs/algorithms.md's ``u``, written out independently of graphrag.tree.rand."""
    digest = blake2b(f"{seed}:{purpose}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def doc(outcome: Outcome) -> dict[str, Any]:
    """The parsed GraphRAGResult."""
    result: dict[str, Any] = orjson.loads(outcome.to_json())
    return result


def rels(outcome: Outcome) -> list[tuple[int, str]]:
    """(note id, relationToFocusNote) of relatedNotes, in order, read from the JSON."""
    return [(int(n["uri"][2:]), n["relationToFocusNote"]) for n in doc(outcome)["relatedNotes"]]


def ids_with(outcome: Outcome, relation: str) -> list[int]:
    return [i for i, r in rels(outcome) if r == relation]


def uris(ids: list[int] | tuple[int, ...]) -> list[str]:
    return [f"/n{i}" for i in ids]
