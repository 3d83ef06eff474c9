"""The one error root of the service.

Every error the service raises on purpose derives from :class:`GraphRagError`. Lower layers translate
driver errors (SQLAlchemy, redis-py, Celery) into these at the seam with ``raise ... from``, so callers
catch one family and users see one clear line, never a traceback.
"""

from __future__ import annotations

__all__ = [
    "CacheUnavailable",
    "ConfigurationError",
    "DatabaseUnavailable",
    "Forbidden",
    "GraphRagError",
    "InvalidParameter",
    "NoteNotFound",
    "SchemaMismatch",
    "Unavailable",
]


class GraphRagError(Exception):
    """Root of every error the service raises on purpose."""


class InvalidParameter(GraphRagError, ValueError):
    """A caller-supplied parameter is out of range or of the wrong kind; ``parameter`` names it."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter


class NoteNotFound(GraphRagError, LookupError):
    """The focus note does not exist or is soft-deleted: it has no context."""

    def __init__(self, note_id: int) -> None:
        super().__init__(f"note {note_id} does not exist or is deleted")
        self.note_id = note_id


class Forbidden(GraphRagError, PermissionError):
    """The reader may not see the note (today's Doughnut: its notebook is not readable to them)."""


class ConfigurationError(GraphRagError):
    """A setting is missing or malformed; the message names the variable."""


class DatabaseUnavailable(GraphRagError):
    """The Doughnut database cannot be reached or answered with an error."""


class SchemaMismatch(GraphRagError):
    """The database lacks tables or columns the service reads; the message names them."""


class CacheUnavailable(GraphRagError):
    """The snapshot cache cannot be reached, timed out, or refuses writes."""


class Unavailable(GraphRagError):
    """Neither a snapshot nor the database can answer (HTTP 503)."""
