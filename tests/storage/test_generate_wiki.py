"""The Doughnut-2026 graph generator at 2,000 notes: deterministic, Doughnut's keys kept, link rows
exactly what Doughnut would have written for the generated contents, and every feature present at a
scaled-down size."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.engine import Engine

from ops.generate_wiki import generate, load, main
from storage.profiles.tables_2026 import (
    DatabaseNotEmpty,
    create_tables,
    note,
    note_wiki_title_cache,
    user,
)
from storage.profiles.wiki_links_2026 import LinkWorld, authored_tokens, dedupe_tokens

N = 2_000
Rows = dict[str, list[dict[str, Any]]]


@cache
def _rows(notes: int, seed: int) -> Rows:
    out: Rows = defaultdict(list)
    for table, row in generate(notes, seed):
        out[table].append(row)
    return dict(out)


def test_generation_is_deterministic_per_seed() -> None:
    first = list(generate(300, 11))
    assert first == list(generate(300, 11))
    assert first != list(generate(300, 12))


def test_ids_follow_insertion_order_and_time_rises() -> None:
    rows = _rows(N, 1)
    for table, batch in rows.items():
        assert [r["id"] for r in batch] == list(range(1, len(batch) + 1)), table
    created = [n["created_at"] for n in rows["note"]]
    assert created == sorted(set(created))
    for n in rows["note"]:
        assert n["deleted_at"] is None or n["deleted_at"] > n["created_at"]
    books = {b["id"]: b["created_at"] for b in rows["notebook"]}
    folders = {f["id"]: f for f in rows["folder"]}
    for n in rows["note"]:
        assert books[n["notebook_id"]] < n["created_at"]
        assert n["folder_id"] is None or folders[n["folder_id"]]["created_at"] <= n["created_at"]
    assert all(f["parent_folder_id"] is None or f["parent_folder_id"] < f["id"] for f in rows["folder"])


def test_titles_and_folder_names_keep_doughnuts_unique_keys() -> None:
    rows = _rows(N, 1)
    titles = Counter((n["notebook_id"], n["folder_id"], n["title"].lower()) for n in rows["note"])
    assert max(titles.values()) == 1
    names = Counter((f["notebook_id"], f["parent_folder_id"], f["name"].lower()) for f in rows["folder"])
    assert max(names.values()) == 1
    for n in rows["note"]:
        assert n["title"] == n["title"].strip() and 0 < len(n["title"]) <= 150
        assert not set('\\/:*?"<>|[]') & set(n["title"]), n["title"]
    per_book = Counter((n["notebook_id"], n["title"].lower()) for n in rows["note"])
    assert any(count > 1 for count in per_book.values())  # common titles repeat across folders


def test_link_rows_are_what_doughnut_would_resolve() -> None:
    rows = _rows(N, 1)
    assert list(LinkWorld(rows).cache_rows()) == rows["note_wiki_title_cache"]


def test_other_seeds_and_sizes_are_consistent_too() -> None:
    for notes, seed in ((1, 0), (7, 3), (500, 5)):
        rows = _rows(notes, seed)
        assert len(rows["note"]) == notes
        assert list(LinkWorld(rows).cache_rows()) == rows.get("note_wiki_title_cache", [])


def test_the_graph_has_every_feature_at_a_scaled_down_size() -> None:
    rows = _rows(N, 1)
    notes = {n["id"]: n for n in rows["note"]}
    live = {i for i, n in notes.items() if n["deleted_at"] is None}
    cache_rows = rows["note_wiki_title_cache"]
    assert len(rows["notebook"]) >= 3 and rows["subscription"] and rows["bazaar_notebook"]
    assert any(o["circle_id"] is not None for o in rows["ownership"]) and rows["circle_user"]
    depth: dict[int | None, int] = {None: 0}
    for f in rows["folder"]:
        depth[f["id"]] = depth[f["parent_folder_id"]] + 1
    assert max(depth.values()) >= 3
    sizes = Counter(n["folder_id"] for i, n in notes.items() if i in live and n["folder_id"])
    assert sizes.most_common(1)[0][1] >= N * 5 // 100 * 9 // 10  # a "monster" folder
    assert sum(1 for n in notes.values() if n["folder_id"] is None) >= N // 20
    pairs = {(r["target_note_id"], r["note_id"]) for r in cache_rows if r["note_id"] in live}
    referrers = Counter(t for t, _ in pairs if t in live)
    assert referrers.most_common(1)[0][1] >= 20  # hubs: 1,000+ at 100k notes
    out_degree = Counter(r["note_id"] for r in cache_rows)
    assert sum(1 for i in notes if out_degree[i] <= 5) > 0.9 * N and max(out_degree.values()) >= 50
    relations = [n for n in notes.values()
                 if (n["content"] or "").startswith("---\ntype: Relationship\n")]
    assert 0.15 * N <= len(relations) <= 0.25 * N
    crossing = [r for r in cache_rows
                if notes[r["target_note_id"]]["notebook_id"] != notes[r["note_id"]]["notebook_id"]]
    assert 0.02 * len(cache_rows) <= len(crossing) and all(":" in r["link_text"] for r in crossing)
    assert 0.01 * N <= N - len(live) <= 0.03 * N
    assert any(notes[r["target_note_id"]]["deleted_at"] is not None for r in cache_rows)
    contents = [n["content"] for n in notes.values()]
    assert None in contents and "" in contents
    assert any(re.search("[\u4e00-\u9fff]", c or "") for c in contents)
    assert any(re.search("[\u0590-\u05ff\u0600-\u06ff]", c or "") for c in contents)
    assert any("🍩" in (c or "") or "🧠" in (c or "") for c in contents)


def test_links_come_in_the_syntaxes_doughnut_users_write() -> None:
    rows = _rows(N, 1)
    texts = [r["link_text"] for r in rows["note_wiki_title_cache"]]
    assert any("|" in t for t in texts)
    assert any("/" in t and t.rsplit("/", 1)[-1] in {"Overview", "Summary", "Introduction", "Examples",
                                                     "Open Questions", "TODO"} for t in texts)
    resolved = Counter(r["note_id"] for r in rows["note_wiki_title_cache"])
    tokens = {n["id"]: len(dedupe_tokens(authored_tokens(n["content"]))) for n in rows["note"]}
    assert sum(tokens.values()) - sum(resolved.values()) >= 20  # dead links, with no row
    relation = next(n for n in rows["note"]
                    if (n["content"] or "").startswith("---\ntype: Relationship"))
    assert re.search(r'^source: "\[\[.+\]\]"$', relation["content"], re.M)


def test_load_matches_the_generation(engine: Engine) -> None:
    counts = load(engine, N, 1, progress=False)
    rows = _rows(N, 1)
    assert counts["notes"] == N and counts["links"] == len(rows["note_wiki_title_cache"])
    assert counts["relationships"] >= 0.15 * N and counts["max_referrers"] >= 20
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(note)).scalar() == N
        links = conn.execute(select(note_wiki_title_cache).order_by(note_wiki_title_cache.c.id)).all()
        stored = {r.id: r for r in conn.execute(select(note))}
    assert [tuple(r) for r in links] == [tuple(r.values()) for r in rows["note_wiki_title_cache"]]
    for expected in rows["note"][::97]:
        got = stored[expected["id"]]
        assert (got.title, got.content, got.deleted_at) == (
            expected["title"], expected["content"], expected["deleted_at"])


def test_load_refuses_tables_with_rows(engine: Engine) -> None:
    create_tables(engine)
    with engine.begin() as conn:
        conn.execute(insert(user).values(id=1))
    with pytest.raises(DatabaseNotEmpty):
        load(engine, 10, 0, progress=False)


def test_cli_prints_counts_or_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'g.db'}"
    assert main(["--db", url, "--notes", "50", "--seed", "2", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == 50
    assert main(["--db", url, "--notes", "50", "--no-progress"]) == 1  # not empty any more
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_ops_generate_makes_2026_shaped_graphs_with_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ops.generate import main as generate_main

    url = f"sqlite:///{tmp_path / 'g.db'}"
    argv = ["--db", url, "--notes", "120", "--seed", "3", "--schema", "doughnut-2026", "--no-progress"]
    assert generate_main(argv) == 0
    counts = json.loads(capsys.readouterr().out)
    rows = _rows(120, 3)
    assert (counts["notes"], counts["links"]) == (len(rows["note"]), len(rows["note_wiki_title_cache"]))
