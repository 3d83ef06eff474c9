"""Shared helpers of the hostile-input, hostile-data and least-privilege suites.

* :func:`scale` reads ``GRAPHRAG_RELIABILITY_SCALE`` (``ci``, the default, or ``full`` for
  ``make test-reliability``) and :func:`sized` picks a figure by it;
* :data:`FIGURES` collects the counts the suites observed; ``conftest.py`` prints them at the end;
* :func:`graphrag` runs the real CLI in a subprocess with a sanitized environment (no Redis, no
  broker reachable unless a test says so), :func:`assert_clean_error` checks its one-line errors;
* :func:`check_result` validates a GraphRAGResult against docs/doughnut.md.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import orjson

SCALE_ENV = "GRAPHRAG_RELIABILITY_SCALE"
SCALES = ("ci", "full")
ROOT = Path(__file__).resolve().parents[2]
#: Nothing listens on port 1: connections are refused at once.
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"
UNREACHABLE_BROKER = "redis://127.0.0.1:1/1"

T = TypeVar("T")

#: name -> figure, printed in the terminal summary by ``tests/reliability/conftest.py``
FIGURES: dict[str, str] = {}


def scale() -> str:
    """``ci`` (default) or ``full``, from ``GRAPHRAG_RELIABILITY_SCALE``."""
    value = os.environ.get(SCALE_ENV, "").strip().lower() or "ci"
    if value not in SCALES:
        raise RuntimeError(f"{SCALE_ENV} must be one of {SCALES}, not {value!r}")
    return value


def sized(*, ci: T, full: T) -> T:
    return full if scale() == "full" else ci


def figure(name: str, value: object) -> None:
    FIGURES[name] = str(value)


def sample_rows() -> list[dict[str, Any]]:
    """The bundled sample notebook (~370 notes) as ``note`` rows for ``NoteStore.insert``."""
    from storage.sample import sample_notes

    return [{
        "id": n.id, "parent_id": n.parent_id, "target_note_id": n.target_note_id,
        "sibling_order": n.sibling_order, "topic_constructor": n.title, "description": n.details,
        "created_at": n.created_at, "updated_at": n.created_at, "deleted_at": n.deleted_at,
        "notebook_id": n.notebook_id, "creator_id": 1,
    } for n in sample_notes()]


# -- the CLI --------------------------------------------------------------------------------------
def cli_env(**overrides: str) -> dict[str, str]:
    """This process's environment without GRAPHRAG_/CELERY_ variables; Redis and broker unreachable."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GRAPHRAG_", "CELERY_")) or k == "GRAPHRAG_TIKTOKEN_FILE"}
    env.update({
        "GRAPHRAG_REDIS_URL": UNREACHABLE_REDIS,
        "GRAPHRAG_REDIS_PREFIX": f"graphrag-reliability:{uuid.uuid4().hex}:v1",
        "GRAPHRAG_REDIS_TIMEOUT_MS": "200",
        "CELERY_BROKER_URL": UNREACHABLE_BROKER,
        "PYTHONUNBUFFERED": "1",
    })
    env.update(overrides)
    return env


def graphrag(*args: str, env: Mapping[str, str] | None = None, cwd: Path | None = None,
             timeout_s: float = 120) -> subprocess.CompletedProcess[bytes]:
    """Run ``graphrag ARGS`` as a user would
    (``python -c "from worker.cli.main import main; main()"``)."""
    code = "from worker.cli.main import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          timeout=timeout_s, env=dict(env) if env is not None else cli_env(),
                          cwd=cwd or ROOT, stdin=subprocess.DEVNULL)


_USAGE_LINE = re.compile(r"^(Usage: |Try '.*--help' for help\.$)")


def error_lines(stderr: str) -> list[str]:
    """stderr without click's usage hint lines (``Usage: ...``, ``Try '... --help' for help.``)."""
    return [line for line in stderr.splitlines() if line.strip() and not _USAGE_LINE.match(line)]


def assert_clean_error(proc: subprocess.CompletedProcess[bytes], codes: tuple[int, ...],
                       *words: str) -> str:
    """A non-zero exit in ``codes``, nothing on stdout, no traceback, and exactly one error line
    (``error: ...`` or click's ``Error: ...``), the last one on stderr. Log lines before it (e.g.
    the reader's "redis unavailable" warning) are allowed."""
    err = proc.stderr.decode(errors="replace")
    assert "Traceback" not in err, err[-3000:]
    assert proc.returncode in codes, (proc.returncode, err[-3000:])
    assert proc.stdout == b"", proc.stdout[:500]
    lines = error_lines(err)
    errors = [line for line in lines if line.lower().startswith("error")]
    assert len(errors) == 1 and lines[-1] == errors[0], f"expected one error line:\n{err[-3000:]}"
    for word in words:
        assert word.lower() in errors[0].lower(), (word, errors[0])
    return errors[0]


# -- the result JSON (docs/doughnut.md) -------------------------------------------------------
RELATIONS = frozenset({
    "Self", "Parent", "Object", "Child", "PriorSibling", "YoungerSibling", "InboundReference",
    "SubjectOfInboundReference", "AncestorInContextualPath", "AncestorInObjectContextualPath",
    "ObjectOfReifiedChild", "SiblingOfParent", "SiblingOfParentOfObject", "ChildOfSiblingOfParent",
    "ChildOfSiblingOfParentOfObject", "InboundReferenceContextualPath",
    "SiblingOfSubjectOfInboundReference", "InboundReferenceToObjectOfReifiedChild",
    "RemotelyRelated", "GrandChild",
})
BARE_KEYS = ("uri", "subjectUriAndTitle", "predicate", "title", "objectUriAndTitle",
             "parentUriAndTitle", "relationToFocusNote", "details", "detailsTruncated", "createdAt")
FOCUS_LISTS = ("children", "priorSiblings", "youngerSiblings", "inboundReferences")
FOCUS_KEYS = (*BARE_KEYS, "contextualPath", *FOCUS_LISTS)
URI = re.compile(r"^/n[0-9]+$")
CREATED_AT = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}\+00:00$")
TRUNCATE_BYTES = 150


def _check_ref(ref: Any) -> None:
    assert isinstance(ref, dict) and list(ref) == ["uri", "title"], ref
    assert URI.match(ref["uri"]) and isinstance(ref["title"], str), ref


def _check_bare(note: Any, allowed: tuple[str, ...]) -> None:
    assert isinstance(note, dict), note
    keys = list(note)
    assert all(k in allowed for k in keys), f"unexpected keys {keys}"
    assert keys == sorted(keys, key=allowed.index), f"keys out of order: {keys}"
    assert all(v is not None for v in note.values()), f"a null value in {keys}"
    assert URI.match(note["uri"]), note["uri"]
    assert note["relationToFocusNote"] in RELATIONS, note["relationToFocusNote"]
    assert isinstance(note["createdAt"], str) and CREATED_AT.match(note["createdAt"]), note["createdAt"]
    link = "predicate" in note
    assert link != ("title" in note), f"exactly one of predicate/title: {keys}"
    if link:
        assert "parentUriAndTitle" not in note, keys
    else:
        assert "subjectUriAndTitle" not in note and "objectUriAndTitle" not in note, keys
    for key in ("subjectUriAndTitle", "objectUriAndTitle", "parentUriAndTitle"):
        if key in note:
            _check_ref(note[key])
    if "detailsTruncated" in note:
        assert note["detailsTruncated"] is True and "details" in note, note
    if "details" in note:
        assert isinstance(note["details"], str)


def check_result(data: bytes, focus_id: int | None = None, *,
                 hidden: frozenset[int] = frozenset()) -> dict[str, Any]:
    """Parse and validate a GraphRAGResult; ``hidden`` ids (deleted notes) must not be shown."""
    result = orjson.loads(data)
    assert isinstance(result, dict) and list(result) == ["focusNote", "relatedNotes"], list(result)
    focus, related = result["focusNote"], result["relatedNotes"]
    _check_bare(focus, FOCUS_KEYS)
    assert focus["relationToFocusNote"] == "Self"
    assert "detailsTruncated" not in focus
    if focus_id is not None:
        assert focus["uri"] == f"/n{focus_id}", focus["uri"]
    for name in ("contextualPath", *FOCUS_LISTS):
        assert isinstance(focus.get(name), list), f"focus lacks {name}"
        assert all(isinstance(u, str) and URI.match(u) for u in focus[name]), name
    assert isinstance(related, list)
    uris = [n["uri"] for n in related if isinstance(n, dict) and "uri" in n]
    assert len(uris) == len(set(uris)), "a note is related twice"
    for note in related:
        _check_bare(note, BARE_KEYS)
        assert note["relationToFocusNote"] != "Self"
        details = note.get("details")
        if note.get("detailsTruncated"):
            assert details.endswith("..."), details[-20:]
            assert len(details[:-3].encode()) <= TRUNCATE_BYTES, len(details.encode())
        elif details is not None:
            assert len(details.encode()) <= TRUNCATE_BYTES, len(details.encode())
    shown = set(uris)
    for name in FOCUS_LISTS:
        assert set(focus[name]) <= shown, (name, set(focus[name]) - shown)
    for note_id in hidden:
        assert f"/n{note_id}" not in shown, f"deleted note {note_id} is shown"
    return result
