"""JSON parsing that reads what Doughnut's Java writes, in both graph models.

Doughnut's Java cuts a body after a UTF-16 unit and Jackson escapes the half pair (``\\uD83D``):
valid JSON that orjson refuses. :func:`loads` takes orjson's fast path and falls back to the
standard library, which reads such an escape into a lone surrogate code point, only then.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["loads"]


def loads(data: bytes | str) -> Any:
    """Parse JSON that may hold a lone surrogate escape such as ``\\uD83D``; orjson otherwise."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as err:
        if "surrogate" not in str(err):
            raise
        return json.loads(data)
