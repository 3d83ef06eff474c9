"""Seeded, order-independent randomness pinned so two implementations agree byte for byte.

``u(seed, purpose, key)`` is a uniform number in [0, 1) that depends only on its arguments, so an edit
far away never reshuffles unrelated choices (docs/algorithms.md).
"""

from __future__ import annotations

from hashlib import blake2b

__all__ = ["u"]

_SCALE = float(2**64)


def u(seed: int, purpose: str, key: int) -> float:
    """``int.from_bytes(blake2b(f"{seed}:{purpose}:{key}", digest_size=8), "big") / 2**64``."""
    digest = blake2b(f"{seed}:{purpose}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / _SCALE
