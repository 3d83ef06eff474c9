"""The bundled Doughnut 2026 sample: it loads into an empty database only (SQLite or MariaDB) and
round-trips, and its rows hold what a real Doughnut holds and the service must handle (people and
sharing, deep and big folders, hubs, links in every syntax, relationship notes, right-to-left, CJK
and emoji text, deleted notes), obey Doughnut's rules for titles and names and let time flow forward;
each named focus has the property its name promises.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.engine import Engine

from storage.profiles.sample_2026 import SAMPLE_2026_FOCUS_IDS, load_sample_2026, sample_2026_rows
from storage.profiles.tables_2026 import (
    DatabaseNotEmpty,
    circle_user,
    create_tables,
    folder,
    nonempty_tables,
    note,
    note_wiki_title_cache,
    notebook,
    subscription,
    user,
)

ASCII_FORBIDDEN_IN_NAMES = set('\\/:*?"<>|')
REFERENCE_DAY = dt.datetime(2026, 8, 22)  # Doughnut's reference commit; the sample predates it


# -- the sample: loading -------------------------------------------------------------------------
def test_sample_loads_and_round_trips(sample_engine: Engine) -> None:
    rows = sample_2026_rows()
    with sample_engine.connect() as conn:
        for table in (note, folder, notebook, note_wiki_title_cache, subscription, circle_user):
            count = conn.execute(select(func.count()).select_from(table)).scalar()
            assert count == len(rows[table.name])
        stored = {r.id: r for r in conn.execute(select(note))}
    for expected in rows["note"]:
        got = stored[expected["id"]]
        assert (got.title, got.content, got.notebook_id, got.folder_id) == (
            expected["title"], expected["content"], expected["notebook_id"], expected["folder_id"])
        assert got.created_at == expected["created_at"] and got.deleted_at == expected["deleted_at"]


def test_loading_refuses_a_database_with_rows(engine: Engine) -> None:
    create_tables(engine)
    with engine.begin() as conn:
        conn.execute(insert(user).values(id=7, name="someone"))
    with pytest.raises(DatabaseNotEmpty, match="user"):
        load_sample_2026(engine)
    assert nonempty_tables(engine) == ["user"]


def test_sample_rows_are_stable_copies() -> None:
    first = sample_2026_rows()
    first["note"][0]["title"] = "changed"
    assert sample_2026_rows()["note"][0]["title"] != "changed"
    assert sample_2026_rows() == sample_2026_rows()


# -- the sample: features --------------------------------------------------------------------------
def _cjk(text: str) -> int:
    return sum(1 for ch in text if unicodedata.name(ch, "").startswith(("CJK", "HIRAGANA", "KATAKANA")))


def _stats(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    notes = {n["id"]: n for n in rows["note"]}
    live = {i for i, n in notes.items() if n["deleted_at"] is None}
    cache = rows["note_wiki_title_cache"]
    depth: dict[int | None, int] = {None: 0}
    for f in rows["folder"]:
        depth[f["id"]] = depth[f["parent_folder_id"]] + 1
    return {
        "notes": notes, "live": live, "cache": cache, "depth": depth,
        "referrers": Counter(t for t, _ in {(r["target_note_id"], r["note_id"]) for r in cache
                                             if r["note_id"] in live and r["target_note_id"] in live}),
        "folder_sizes": Counter(n["folder_id"] for n in notes.values() if n["folder_id"] is not None),
    }


def test_sample_has_the_people_and_sharing_of_a_real_doughnut() -> None:
    rows = sample_2026_rows()
    owner_user = {o["id"]: o["user_id"] for o in rows["ownership"]}
    by_owner = Counter(owner_user[b["ownership_id"]] for b in rows["notebook"])
    first_user, owned = by_owner.most_common(1)[0]
    assert len(rows["user"]) >= 3 and owned * 2 > len(rows["notebook"])
    subscriber = [s for s in rows["subscription"]
                  if owner_user[rows["notebook"][s["notebook_id"] - 1]["ownership_id"]] == first_user]
    assert subscriber and by_owner[subscriber[0]["user_id"]] >= 1
    circle_books = [b for b in rows["notebook"] if owner_user[b["ownership_id"]] is None]
    assert circle_books and len(rows["circle_user"]) >= 2
    assert rows["bazaar_notebook"]
    assert any(b["deleted_at"] is not None for b in rows["notebook"])


def test_sample_has_the_shapes_the_service_must_handle() -> None:
    rows = sample_2026_rows()
    s = _stats(rows)
    notes, cache = s["notes"], s["cache"]
    contents = [n["content"] for n in notes.values()]
    assert max(s["depth"].values()) >= 3
    assert max(s["folder_sizes"].values()) >= 300
    assert max(s["referrers"].values()) >= 100
    at_root = [n for n in notes.values() if n["folder_id"] is None and n["notebook_id"] is not None]
    assert len(at_root) >= 10
    assert any(n["notebook_id"] is None for n in notes.values())
    assert sum(1 for c in contents if c and c.startswith("---\ntype: Note\n---\n")) > 0.9 * len(contents)
    assert None in contents and "" in contents
    assert max(len((c or "").encode()) for c in contents) >= 100 * 1024
    assert any(len(n["title"]) == 150 and _cjk(n["title"]) > 120 for n in notes.values())
    assert any(re.search("[\u0590-\u05ff]", c or "") and re.search("[\u0600-\u06ff]", c or "")
               for c in contents)  # Hebrew and Arabic: right to left
    assert any("\u200d" in (c or "") for c in contents)  # an emoji ZWJ sequence
    assert any("🍩" in n["title"] for n in notes.values())
    assert sum(1 for n in notes.values() if n["deleted_at"] is not None) >= 3
    assert any(notes[r["target_note_id"]]["deleted_at"] is not None for r in cache)  # rows kept
    assert any(notes[r["note_id"]]["deleted_at"] is not None for r in cache)
    assert any(r["note_id"] == r["target_note_id"] for r in cache)


def test_sample_links_come_in_every_syntax() -> None:
    rows = sample_2026_rows()
    notes = {n["id"]: n for n in rows["note"]}
    texts = [(r, notes[r["note_id"]], notes[r["target_note_id"]])
             for r in rows["note_wiki_title_cache"]]
    assert any("|" in r["link_text"] for r, _, _ in texts)
    qualified = [r for r, a, b in texts
                 if ":" in r["link_text"] and a["notebook_id"] != b["notebook_id"]]
    assert len(qualified) >= 20
    assert any("/" in r["link_text"] and ":" not in r["link_text"] for r, _, _ in texts)
    assert any(r["link_text"].startswith("[") for r, _, _ in texts)  # a Markdown path link
    assert any(f"```python\n# the in-place alternative is [[{r['link_text']}]]" in (a["content"] or "")
               for r, a, _ in texts)


def test_relationship_notes_link_both_endpoints_in_order() -> None:
    rows = sample_2026_rows()
    first_two: dict[int, list[int]] = {}
    for r in rows["note_wiki_title_cache"]:
        first_two.setdefault(r["note_id"], []).append(r["target_note_id"])
    titles = {n["id"]: n["title"] for n in rows["note"]}
    relations = [n for n in rows["note"] if (n["content"] or "").startswith("---\ntype: Relationship\n")]
    assert len(relations) >= 5
    for n in relations:
        relation = re.search(r"^relation: (.*)$", n["content"], re.M)
        assert relation and re.fullmatch(r"[a-z]+(-[a-z]+)*", relation.group(1))
        source, target = (titles[i] for i in first_two[n["id"]][:2])
        assert n["title"] == f"{source} {relation.group(1).replace('-', ' ')} {target}"


def test_titles_and_names_obey_doughnuts_rules() -> None:
    rows = sample_2026_rows()
    keys = Counter((n["notebook_id"], n["folder_id"], n["title"].lower()) for n in rows["note"])
    assert max(keys.values()) == 1
    places = Counter((f["notebook_id"], f["parent_folder_id"], f["name"]) for f in rows["folder"])
    assert max(places.values()) == 1
    names = [n["title"] for n in rows["note"]] + [f["name"] for f in rows["folder"]]
    names += [b["name"] for b in rows["notebook"]]
    for name in names:
        assert name == name.strip() and name and len(name) <= 150, name
        assert not ASCII_FORBIDDEN_IN_NAMES & set(name) and all(ord(ch) >= 32 for ch in name), name
    assert any("｜" in t or "？" in t for t in names) and any("+" in t or "#" in t for t in names)


def test_sample_time_flows_forward() -> None:
    rows = sample_2026_rows()
    created = [n["created_at"] for n in rows["note"]]
    assert created == sorted(set(created)) and created[-1] < REFERENCE_DAY
    for n in rows["note"]:
        assert n["created_at"].microsecond == 0
        assert n["deleted_at"] is None or n["created_at"] < n["deleted_at"] < REFERENCE_DAY
        assert n["updated_at"] >= n["created_at"]
    first_note: dict[int | None, dt.datetime] = {}
    for n in rows["note"]:
        first_note.setdefault(n["notebook_id"], n["created_at"])
    assert all(b["created_at"] < first_note[b["id"]] for b in rows["notebook"])


def test_focus_ids_name_notes_with_their_property() -> None:
    rows = sample_2026_rows()
    s = _stats(rows)
    notes, ids = s["notes"], SAMPLE_2026_FOCUS_IDS
    assert set(ids.values()) <= s["live"]
    assert s["referrers"][ids["hub"]] >= 100
    assert s["folder_sizes"][notes[ids["big_folder_note"]]["folder_id"]] >= 300
    assert s["depth"][notes[ids["deep_folder_note"]]["folder_id"]] == max(s["depth"].values())
    crossing = [r for r in s["cache"] if r["note_id"] == ids["cross_notebook_linker"]
                and notes[r["target_note_id"]]["notebook_id"] != notes[r["note_id"]]["notebook_id"]]
    assert len(crossing) >= 3
    assert any(notes[r["target_note_id"]]["deleted_at"] is not None
               for r in s["cache"] if r["note_id"] == ids["deleted_target_linker"])
    subscribed = {x["notebook_id"] for x in rows["subscription"]}
    assert notes[ids["subscriber_visible_note"]]["notebook_id"] in subscribed
    assert sum(1 for ch in notes[ids["cjk_note"]]["content"] if "\u4e00" <= ch <= "\u9fff") >= 100
