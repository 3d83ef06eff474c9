"""The SQL blocks README.md and ops/runbook.md show for the database's users, from storage.grants.

Two blocks, each a fenced SQL block per layout (today's Doughnut first): ``grants-reader`` (the user
every process reads with) and ``grants-capture`` (``graphrag cdc``'s user). ``make docs`` writes them
between their markers (ops.docgen); tests/test_grants_doc.py fails while a document shows other SQL.
"""

from __future__ import annotations

from collections.abc import Callable

from storage.grants import LAYOUTS, capture_sql, reader_sql

__all__ = ["capture_block", "reader_block"]

_LABELS = {
    "doughnut-2026": "Today's Doughnut (`doughnut-2026`):",
    "doughnut-2025": "Doughnut 2025, the note tree (`doughnut-2025`):",
}


def _block(statements: Callable[[str], list[str]]) -> str:
    parts = [f"{_LABELS[layout]}\n\n```sql\n" + "\n".join(statements(layout)) + "\n```"
             for layout in LAYOUTS]
    return "\n\n".join(parts) + "\n"


def reader_block() -> str:
    """The reading user's SQL, per layout."""
    return _block(reader_sql)


def capture_block() -> str:
    """Change capture's user's SQL, per layout."""
    return _block(capture_sql)
