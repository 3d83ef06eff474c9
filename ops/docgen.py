"""The generated blocks of README.md and ops/runbook.md: written by ``make docs``, checked by tests.

A block sits between two marker lines, ``<!-- NAME:begin ... -->`` and ``<!-- NAME:end -->``; what is
between them is replaced by what its generator returns now, each line indented as the begin marker
is (a block inside a list item). The markers themselves are written by hand, once.

``python -m ops.docgen --write`` rewrites the documents; ``python -m ops.docgen`` only says which
blocks differ (exit 1), as tests/test_settings_doc.py and tests/test_grants_doc.py do.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ops.grants_doc import capture_block, reader_block
from ops.settings_doc import compose_table, missing_meanings, settings_table

__all__ = ["BLOCKS", "DOCUMENTS", "ROOT", "block", "differences", "main", "regenerate"]

ROOT = Path(__file__).resolve().parents[1]
#: Block name -> its generator.
BLOCKS: dict[str, Callable[[], str]] = {
    "settings": settings_table,
    "compose-settings": compose_table,
    "grants-reader": reader_block,
    "grants-capture": capture_block,
}
#: Document (relative to the repository) -> the blocks it holds.
DOCUMENTS: dict[str, tuple[str, ...]] = {
    "README.md": ("settings", "compose-settings", "grants-reader", "grants-capture"),
    "ops/runbook.md": ("grants-reader", "grants-capture"),
}


class MarkerError(ValueError):
    """A document lacks a block's markers, or holds them more than once."""


def _span(text: str, name: str) -> tuple[int, int, str]:
    """Where the block's content starts and ends in ``text``, and the begin marker's indentation."""
    begins = list(re.finditer(rf"^([ \t]*)<!-- {re.escape(name)}:begin\b[^\n]*-->[ \t]*\n", text, re.M))
    ends = list(re.finditer(rf"^[ \t]*<!-- {re.escape(name)}:end -->", text, re.M))
    if len(begins) != 1 or len(ends) != 1 or ends[0].start() < begins[0].end():
        raise MarkerError(f"needs one '<!-- {name}:begin ... -->' line and, after it, one "
                          f"'<!-- {name}:end -->'")
    return begins[0].end(), ends[0].start(), begins[0][1]


def block(text: str, name: str) -> str:
    """The content of block ``name`` as ``text`` holds it."""
    start, end, _ = _span(text, name)
    return text[start:end]


def _indented(content: str, indent: str) -> str:
    return "".join(indent + line if line.strip() else line for line in content.splitlines(True))


def regenerate(text: str, names: Sequence[str], document: str = "the document") -> str:
    """``text`` with the blocks ``names`` generated afresh; MarkerError names a missing marker."""
    for name in names:
        try:
            start, end, indent = _span(text, name)
        except MarkerError as err:
            raise MarkerError(f"{document}: {err}") from None
        text = text[:start] + _indented(BLOCKS[name](), indent) + text[end:]
    return text


def differences(document: str, text: str | None = None) -> list[str]:
    """Per block of ``document`` that differs from what is generated now, a unified diff naming it."""
    text = (ROOT / document).read_text(encoding="utf-8") if text is None else text
    fresh = regenerate(text, DOCUMENTS[document], document)
    out = []
    for name in DOCUMENTS[document]:
        shown, wanted = block(text, name), block(fresh, name)
        if shown != wanted:
            diff = difflib.unified_diff(shown.splitlines(), wanted.splitlines(), lineterm="",
                                        fromfile=f"{document} [{name}]", tofile="generated")
            out.append("\n".join(diff))
    return out


def _update(document: str, write: bool) -> bool:
    """Whether ``document`` differed from what is generated; rewritten when ``write``."""
    path = ROOT / document
    text = path.read_text(encoding="utf-8")
    fresh = regenerate(text, DOCUMENTS[document], document)
    if fresh != text and write:
        path.write_text(fresh, encoding="utf-8")
    return fresh != text


def main(argv: Sequence[str] | None = None) -> int:
    """Write (``--write``) or check the generated blocks of every document."""
    parser = argparse.ArgumentParser(prog="python -m ops.docgen", description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the documents' blocks")
    write = parser.parse_args(argv).write
    if write and missing_meanings():
        print(f"worker/settings_meanings.py: no meaning for {', '.join(missing_meanings())}")
        return 1
    stale = [document for document in DOCUMENTS if _update(document, write)]
    for document in stale:
        print(f"{document}: {'rewrote' if write else 'differs from'} the generated blocks")
    return 1 if stale and not write else 0


if __name__ == "__main__":
    sys.exit(main())
