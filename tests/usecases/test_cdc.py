"""Change capture's mapping from committed row changes to the webhook's events (fast: no service).

Every kind of Doughnut write, for both table layouts, gives the event a relay would post, with the
before/after the resolver needs; each event parses as the webhook's payload does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest

from service.cdc import events_of
from service.note_event import NoteEvent

AT = "2026-11-23T10:00:00.000Z"


@dataclass(frozen=True)
class Row:
    table: str
    kind: Literal["insert", "update", "delete"]
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def tree_note(**changes: Any) -> dict[str, Any]:
    return {"id": 5, "parent_id": 2, "target_note_id": None, "topic_constructor": "T",
            "deleted_at": None} | changes


def wiki_note(**changes: Any) -> dict[str, Any]:
    return {"id": 5, "folder_id": 3, "notebook_id": 1, "title": "T", "content": "c",
            "deleted_at": None} | changes


def link(row_id: int, note: int, target: int) -> dict[str, Any]:
    return {"id": row_id, "note_id": note, "target_note_id": target, "link_text": "x"}


def one(changes: list[Row], model: str) -> dict[str, Any]:
    events = events_of(changes, model=model, occurred_at=AT)
    assert len(events) == 1, events
    NoteEvent.from_json(events[0])  # the webhook path parses it
    return events[0]


@pytest.mark.parametrize(("before", "after", "kind"), [
    (tree_note(), tree_note(topic_constructor="U"), "note.updated"),
    (tree_note(), tree_note(parent_id=7), "note.moved"),
    (tree_note(), tree_note(target_note_id=9), "note.moved"),
    (tree_note(), tree_note(deleted_at="2026-11-01"), "note.deleted"),
    (tree_note(deleted_at="2026-11-01"), tree_note(), "note.restored"),
])
def test_a_tree_note_update_names_what_changed(before: Any, after: Any, kind: str) -> None:
    event = one([Row("note", "update", before, after)], "tree")
    assert event["type"] == kind and event["noteId"] == 5
    assert event["before"] == {"parentId": before["parent_id"], "targetNoteId": before["target_note_id"]}
    assert event["after"] == {"parentId": after["parent_id"], "targetNoteId": after["target_note_id"]}


def test_tree_inserts_and_hard_deletes() -> None:
    created = one([Row("note", "insert", None, tree_note(target_note_id=8))], "tree")
    assert (created["type"], created["after"], "before" in created) == (
        "note.created", {"parentId": 2, "targetNoteId": 8}, False)
    gone = one([Row("note", "delete", tree_note(), None)], "tree")
    assert (gone["type"], gone["before"], "after" in gone) == (
        "note.deleted", {"parentId": 2, "targetNoteId": None}, False)


def test_a_content_edit_carries_exactly_the_link_targets_it_removed_and_added() -> None:
    event = one([Row("note", "update", wiki_note(), wiki_note(content="[[B]]")),
                 Row("note_wiki_title_cache", "delete", link(1, 5, 7), None),
                 Row("note_wiki_title_cache", "delete", link(2, 5, 8), None),
                 Row("note_wiki_title_cache", "insert", None, link(3, 5, 8)),
                 Row("note_wiki_title_cache", "insert", None, link(4, 5, 9))], "wiki")
    assert event["type"] == "note.updated"
    assert event["before"] == {"folderId": 3, "notebookId": 1, "linkTargets": [7, 8]}
    assert event["after"] == {"folderId": 3, "notebookId": 1, "linkTargets": [8, 9]}
    parsed = NoteEvent.from_json(event)
    assert set(parsed.before_links or ()) ^ set(parsed.after_links or ()) == {7, 9}


def test_link_rows_changed_without_their_note_are_an_update_of_that_note() -> None:
    event = one([Row("note_wiki_title_cache", "update", link(1, 6, 7), link(1, 6, 12))], "wiki")
    assert event == {"type": "note.updated", "noteId": 6, "occurredAt": AT,
                     "before": {"linkTargets": [7]}, "after": {"linkTargets": [12]}}


@pytest.mark.parametrize(("before", "after", "kind"), [
    (wiki_note(), wiki_note(folder_id=4), "note.moved"),
    (wiki_note(), wiki_note(folder_id=None), "note.moved"),
    (wiki_note(), wiki_note(deleted_at="2026-11-01"), "note.deleted"),
    (wiki_note(deleted_at="2026-11-01"), wiki_note(), "note.restored"),
    (wiki_note(), wiki_note(title="Renamed"), "note.updated"),
])
def test_a_wiki_note_update_names_what_changed(before: Any, after: Any, kind: str) -> None:
    event = one([Row("note", "update", before, after)], "wiki")
    assert event["type"] == kind
    assert event["before"] == {"folderId": before["folder_id"], "notebookId": 1}
    assert event["after"] == {"folderId": after["folder_id"], "notebookId": 1}


def test_a_new_note_comes_with_its_folder_notebook_and_targets() -> None:
    event = one([Row("note", "insert", None, wiki_note(id=40)),
                 Row("note_wiki_title_cache", "insert", None, link(9, 40, 2))], "wiki")
    assert event["type"] == "note.created" and event["noteId"] == 40
    assert event["after"] == {"folderId": 3, "notebookId": 1, "linkTargets": [2]}


FOLDER = {"id": 3, "notebook_id": 1, "parent_folder_id": None, "name": "F"}


@pytest.mark.parametrize(("kind", "before", "after", "expected"), [
    ("insert", None, FOLDER, "folder.created"),
    ("update", FOLDER, FOLDER | {"name": "G"}, "folder.renamed"),
    ("update", FOLDER, FOLDER | {"parent_folder_id": 8}, "folder.moved"),
    ("delete", FOLDER, None, "folder.deleted"),
])
def test_folder_changes(kind: Any, before: Any, after: Any, expected: str) -> None:
    event = one([Row("folder", kind, before, after)], "wiki")
    assert (event["type"], event["folderId"]) == (expected, 3)
    parsed = NoteEvent.from_json(event)
    assert parsed.folder_id == 3 and parsed.before_notebook_id == (1 if before else None)


def test_notebook_changes() -> None:
    book = {"id": 1, "name": "NB", "ownership_id": 1}
    kinds = [one([Row("notebook", k, b, a)], "wiki")["type"]
             for k, b, a in (("insert", None, book), ("update", book, book | {"name": "X"}),
                             ("delete", book, None))]
    assert kinds == ["notebook.created", "notebook.renamed", "notebook.deleted"]


def test_unwatched_tables_and_empty_transactions_give_nothing() -> None:
    assert events_of([Row("other", "insert", None, {"id": 1})], model="tree", occurred_at=AT) == []
    assert events_of([Row("other", "insert", None, {"id": 1})], model="wiki", occurred_at=AT) == []
    assert events_of([], model="wiki", occurred_at=AT) == []


@pytest.mark.parametrize(("ours", "server", "expected"), [
    ("gtid:0-1-10", "gtid:0-1-10", (0, None)),
    ("gtid:0-1-10", "gtid:0-1-25", (15, None)),
    ("gtid:0-1-10,1-2-3", "gtid:0-1-12,1-2-9,2-3-1", (9, None)),
    ("file:bin.000002:400", "file:bin.000002:1400", (None, 1000)),
    ("file:bin.000002:400", "file:bin.000003:100", (None, None)),
    ("gtid:0-1-1", "file:bin.000001:4", (None, None)),
])
def test_the_lag_between_two_positions(ours: str, server: str, expected: tuple[Any, Any]) -> None:
    from worker.cdc.lag import distance

    assert distance(ours, server) == expected
