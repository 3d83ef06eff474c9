"""Doughnut's approximate token budget, emulated exactly (ApproximateUtf8TokenBudget at b2c0268c09).

Doughnut counts only note bodies, in "approximate tokens" of 3.75 UTF-8 bytes:

* ``estimate(text)`` is ``ceil(bytes / 3.75)``, 0 for None or ``""``;
* ``truncate(text, n)`` returns ``text`` unchanged when its bytes fit ``floor(n * 3.75)``, else the
  longest prefix, measured in UTF-16 code units (Java's binary search over ``String`` positions), whose
  UTF-8 size fits; there is no ellipsis.

Java measures with ``String.getBytes(UTF_8)``, which writes a lone surrogate as ``?`` (one byte). So
when the byte limit falls inside a character outside the BMP, the prefix keeps the pair's high
surrogate alone if that single ``?`` byte still fits. The binary search is exact because the byte size
of a prefix never decreases as the prefix grows (a lone high surrogate costs 1, the whole pair 4), so
it finds the same cut as the linear walk here. Python strings stand for Java strings code point by
code point; a lone surrogate stays a lone surrogate code point.

Integer arithmetic is exact: for every ``int`` byte count ``b`` below 2^31, Java's double quotient
``b / 3.75`` is an integer exactly when ``4b/15`` is, and otherwise stays more than 1/15 away from one,
so ``ceil`` agrees with ``(4b + 14) // 15``; ``n * 3.75`` is exact in a double, so ``floor`` agrees
with ``15n // 4``.

Re-truncation is idempotent in the way a budget-independent trace needs: for ``b <= a``,
``truncate(truncate(x, a), b) == truncate(x, b)``. Both cuts are the longest UTF-16 prefix of ``x``
under a byte limit; the size of a prefix depends only on that prefix, and every prefix of ``x`` longer
than ``truncate(x, a)`` is over the larger limit, so over the smaller one too.
"""

from __future__ import annotations

import re

__all__ = [
    "byte_limit",
    "cut_and_measure",
    "estimate_tokens",
    "java_utf8_length",
    "join_surrogates",
    "tokens_of",
    "truncate_tokens",
    "utf16_length",
]

_SURROGATE = re.compile("[\ud800-\udfff]")


def join_surrogates(text: str) -> str:
    """``text`` with any high+low surrogate code point pair joined into one code point, as Java
    would read the two chars; lone surrogates stay."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _plain_utf8(text: str) -> bytes | None:
    """``text``'s UTF-8 bytes, None when it holds a surrogate code point: strict UTF-8 refuses
    one, so a single encoding both finds out and measures (a regular expression's scan of a text
    outside the BMP costs several times as much)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def java_utf8_length(text: str) -> int:
    """``text.getBytes(UTF_8).length`` in Java: a lone surrogate is one byte (``?``)."""
    data = _plain_utf8(text)
    if data is not None:  # (no surrogates: the UTF-8 size is Java's)
        return len(data)
    text = join_surrogates(text)
    lone = len(_SURROGATE.findall(text))
    return len(text.encode("utf-8", "surrogatepass")) - 2 * lone


def utf16_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units."""
    return len(join_surrogates(text).encode("utf-16-le", "surrogatepass")) // 2


def byte_limit(max_tokens: int) -> int:
    """``(int) Math.floor(maxTokens * 3.75)``."""
    return max_tokens * 15 // 4


def estimate_tokens(text: str | None) -> int:
    """``ceil(UTF-8 bytes / 3.75)``; 0 for None or empty."""
    if not text:
        return 0
    return tokens_of(java_utf8_length(text))


def tokens_of(utf8_bytes: int) -> int:
    """The estimate of a text of ``utf8_bytes`` Java UTF-8 bytes: ``ceil(utf8_bytes / 3.75)``."""
    return (4 * utf8_bytes + 14) // 15


def truncate_tokens(text: str | None, max_tokens: int) -> str | None:
    """The longest UTF-16 prefix of ``text`` whose Java UTF-8 size fits ``floor(max_tokens * 3.75)``;
    ``text`` itself when it fits (None and ``""`` are returned as they are)."""
    if not text:
        return text
    return cut_and_measure(text, max_tokens)[0]


def cut_and_measure(text: str, max_tokens: int) -> tuple[str, int]:
    """``truncate_tokens(text, max_tokens)`` and its Java UTF-8 size (so its estimate is
    ``tokens_of`` that size), from one encoding of a text without surrogates."""
    if not text:
        return text, 0
    limit = byte_limit(max_tokens)
    data = _plain_utf8(text)
    if data is None:  # (surrogates: their pairs joined, as Java reads them)
        return _cut_walk(join_surrogates(text), limit)
    if len(data) <= limit:
        return text, len(data)
    return _cut_plain(text, data, limit)


def _cut_plain(text: str, data: bytes, limit: int) -> tuple[str, int]:
    """The cut of a text without surrogates whose UTF-8 ``data`` is over ``limit``, and its size:
    back off to a character boundary in the bytes."""
    end = max(limit, 0)
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    prefix = data[:end].decode("utf-8")
    if data[end] >= 0xF0 and end + 1 <= limit:  # a 4-byte char: its high surrogate alone still fits
        return prefix + _high_surrogate(text[len(prefix)]), end + 1
    return prefix, end


def _cut_walk(text: str, limit: int) -> tuple[str, int]:
    """The cut of a text that may hold lone surrogates (rare; a Java cut leaves one at the end), and
    its size: by the bytes up to the first surrogate, then code point by code point."""
    first = _SURROGATE.search(text)
    start = len(text) if first is None else first.start()
    head = text[:start].encode("utf-8")
    if len(head) > max(limit, 0):  # (_cut_plain needs a byte at the limit)
        return _cut_plain(text[:start], head, limit)
    used = len(head)
    for index in range(start, len(text)):
        char = text[index]
        size = _java_size(char)
        if used + size > limit:
            if size == 4 and used + 1 <= limit:
                return text[:index] + _high_surrogate(char), used + 1
            return text[:index], used
        used += size
    return text, used


def _java_size(char: str) -> int:
    point = ord(char)
    if point < 0x80 or 0xD800 <= point <= 0xDFFF:
        return 1
    if point < 0x800:
        return 2
    return 3 if point < 0x10000 else 4


def _high_surrogate(char: str) -> str:
    return chr(0xD800 + ((ord(char) - 0x10000) >> 10))
