"""Doughnut's save-time link rules as restated in ``storage.profiles.wiki_links_2026``.

Expected values are written from Doughnut's rules (its ``WikiLinkMarkdown``, ``WikiLinkTargetReference``
and ``WikiLinkResolver`` at commit b2c0268c09 and the tests that pin them), not read off the module.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from storage.profiles.sample_2026 import sample_2026_rows
from storage.profiles.wiki_links_2026 import (
    LinkWorld,
    PathTarget,
    authored_tokens,
    dedupe_key,
    dedupe_tokens,
    frontmatter_values,
    link_target,
    path_target,
    qualified,
    split_frontmatter,
)

T0 = dt.datetime(2026, 1, 1)


def test_frontmatter_tokens_come_first_then_the_body_in_document_order() -> None:
    content = ('---\ntype: Relationship\nsource: "[[A]]"\ntarget: "[[NB: B]]"\nsee:\n  - "[[C]]"\n'
               "plain: [[Flow]]\n---\nBody [[D]] then [e](/F/G.md) and ![img](/F/H.md) "
               "and [app](/n/12) and [[ ]]\n```\n[[In Code]]\n```")
    assert authored_tokens(content) == ["A", "NB: B", "C", "D", "[e](/F/G.md)", "In Code"]


def test_without_a_closed_fence_the_whole_content_is_scanned() -> None:
    assert authored_tokens("---\ntype: Note\n[[A]]") == ["A"]
    assert authored_tokens("[[ padded ]] [[x|y]]") == ["padded", "x|y"]
    assert authored_tokens(None) == [] and authored_tokens("") == []
    assert split_frontmatter("\ufeff---\r\nk: v\r\n---\r\nbody") == ("k: v", "body")


def test_the_yaml_subset_reads_what_doughnut_reads() -> None:
    yaml_text = ('a: "x \\\\n [[Q\\"uote]]"\nb: \'it\'\'s [[S]]\'\nlist:\n  - "[[L1]]"\n\n  - [[L2]]\n'
                 "c: [[Flow]] # comment\nd: plain [[P]] # note\n- [[Stray]]\nnested:\n  k: [[N]]")
    expected = ['x \\n [[Q"uote]]', "it's [[S]]", "plain [[P]]"]  # a list holding a list: dropped
    assert frontmatter_values(yaml_text) == expected
    valid = yaml_text.replace("- [[Stray]]\n", "")  # a stray item makes it invalid YAML
    assert frontmatter_values(valid) == _reference_values(valid) == expected
    good_list = "see:\n  - '[[A]]'\n  - \"[[B]]\"\nnext: \"[[C]]\""
    assert frontmatter_values(good_list) == _reference_values(good_list) == ["[[A]]", "[[B]]", "[[C]]"]


def test_targets_displays_notebooks_and_paths() -> None:
    targets = [link_target(t) for t in ("A|b", "A|", "A| ", "A", "[t](/X/Y.md)")]
    assert targets == ["A", "A", "A", "A", "/X/Y.md"]
    assert qualified("NB: Title") == ("NB", "Title") == qualified("NB:Title")
    assert qualified("a:b:c") == ("a", "b:c")
    assert [qualified(t) for t in (":T", "NB:", " :T", "NB: ", "Title")] == [None] * 5
    assert path_target("A/B/T.md") == PathTarget(("A", "B"), "T")
    assert path_target("/T") == PathTarget((), "T") == path_target("/T.MD")
    assert [path_target(t) for t in ("T", "T.md", "NB:A/B", "/", "A/")] == [None] * 5


names = st.text(st.characters(blacklist_characters="/:|[]\n\r",
                              blacklist_categories=("Cs", "Cc", "Zs")), min_size=1, max_size=12)


@given(st.lists(names, min_size=1, max_size=4), names)
def test_a_path_splits_back_into_its_folders_and_title(folders: list[str], title: str) -> None:
    parsed = path_target("/".join([*folders, title]))
    if not title.lower().endswith(".md"):
        assert parsed == PathTarget(tuple(folders), title)


SPELLINGS = ["Same", "same", "ＳＡＭＥ", "Other", "other|shown", "ｏｔｈｅｒ|shown"]


@given(st.lists(st.sampled_from(SPELLINGS)))
def test_dedupe_keeps_the_first_spelling_of_each_key(tokens: list[str]) -> None:
    kept = dedupe_tokens(tokens)
    keys = [dedupe_key(t) for t in kept]
    assert len(keys) == len(set(keys)) and set(keys) == {dedupe_key(t) for t in tokens}
    assert all(tokens.index(t) == min(i for i, u in enumerate(tokens) if dedupe_key(u) == dedupe_key(t))
               for t in kept)
    assert dedupe_tokens(kept) == kept


def _reference_values(yaml_text: str) -> list[str]:
    """Doughnut's supported values via a real YAML parser: scalars and lists of scalars, as text."""
    loaded: Any = yaml.safe_load(yaml_text) if yaml_text.strip() else None
    out: list[str] = []
    for value in (loaded or {}).values() if isinstance(loaded, dict) else ():
        items = value if isinstance(value, list) else [value]
        if all(isinstance(v, str | int | float | bool) for v in items):
            out += [str(v) for v in items if v is not None]
    return out


def test_the_small_yaml_reader_agrees_with_a_real_parser_on_the_sample() -> None:
    checked = 0
    for row in sample_2026_rows()["note"]:
        split = split_frontmatter(row["content"] or "")
        if split is None:
            continue
        mine = [t for v in frontmatter_values(split[0]) for t in authored_tokens(f"---\n---\n{v}")]
        theirs = [t for v in _reference_values(split[0]) for t in authored_tokens(f"---\n---\n{v}")]
        assert mine == theirs, row["title"]
        checked += 1
    assert checked > 400


# -- resolution in a small world ---------------------------------------------------------------------
def day(offset: int | None) -> dt.datetime | None:
    return None if offset is None else T0 + dt.timedelta(days=offset)


def _world(notes: list[tuple[int, int | None, str, str | None, int, int | None]],
           deleted_notebook_day: int | None = None) -> LinkWorld:
    """Notebooks: 1 "Mine" (user 1), 2 "Theirs" (user 2), 3 "Shared" (bazaar, user 2),
    4 "Club" (circle 1: users 3 and 2), 5 "Theirs" (user 3). Notes: (id, notebook, title, content,
    created day, deleted day)."""
    books = [(1, "Mine", 1), (2, "Theirs", 2), (3, "Shared", 2), (4, "Club", 4), (5, "Theirs", 3)]
    rows: dict[str, list[dict[str, Any]]] = {
        "ownership": [{"id": o, "user_id": u, "circle_id": c}
                      for o, u, c in ((1, 1, None), (2, 2, None), (3, 3, None), (4, None, 1))],
        "circle_user": [{"circle_id": 1, "user_id": 3}, {"circle_id": 1, "user_id": 2}],
        "subscription": [{"user_id": 1, "notebook_id": 5}],
        "bazaar_notebook": [{"notebook_id": 3}],
        "notebook": [{"id": i, "name": n, "ownership_id": o, "created_at": T0,
                      "deleted_at": day(deleted_notebook_day) if i == 2 else None} for i, n, o in books],
        "note": [{"id": i, "notebook_id": nb, "folder_id": None, "title": t, "content": c,
                  "created_at": day(made), "updated_at": day(made), "deleted_at": day(gone)}
                 for i, nb, t, c, made, gone in notes],
    }
    return LinkWorld(rows)


def test_a_link_resolves_as_of_its_save() -> None:
    world = _world([(1, 1, "Linker", "[[Later]] [[Gone]] [[Kept]]", 5, None),
                    (2, 1, "Later", None, 6, None), (3, 1, "Gone", None, 1, 4),
                    (4, 1, "Kept", None, 1, 9)])
    assert world.links(world.notes[1]) == [("Kept", 4)]


def test_the_lowest_readable_id_wins_and_readability_is_the_savers() -> None:
    world = _world([(1, 2, "Dune", None, 1, None), (2, 5, "Dune", None, 2, None),
                    (3, 1, "Log", "[[Theirs: dune]] [[Shared: Soup]] [[Club: Plan]]", 5, None),
                    (4, 3, "Soup", None, 1, None),
                    (5, 4, "Plan", "[[Theirs: Dune]] [[Mine: Log]]", 6, None),
                    (6, 4, "Plan B", None, 1, None)])
    assert world.links(world.notes[3]) == [("Theirs: dune", 2), ("Shared: Soup", 4)]
    assert world.saver(world.notes[5]) == 2  # the circle's lowest-id member
    assert world.links(world.notes[5]) == [("Theirs: Dune", 1)]


def test_a_deleted_notebook_hides_its_notes_from_later_saves() -> None:
    world = _world([(1, 2, "Idea", None, 1, None), (2, 2, "Before", "[[Idea]]", 2, None),
                    (3, 2, "After", "[[Idea]]", 8, None)], deleted_notebook_day=5)
    assert world.links(world.notes[2]) == [("Idea", 1)] and world.links(world.notes[3]) == []


def test_case_folds_but_kana_and_width_do_not() -> None:
    world = _world([(1, 1, "École", None, 1, None), (2, 1, "はし", None, 1, None),
                    (3, 1, "x", "[[ÉCOLE]] [[ばし]] [[ＥＣＯＬＥ]] [[はし|chopsticks]] [[はし]]", 2,
                     None)])
    assert world.links(world.notes[3]) == [("ÉCOLE", 1), ("はし|chopsticks", 2), ("はし", 2)]
    assert unicodedata.normalize("NFKC", "ＥＣＯＬＥ") == "ECOLE"  # no accent: a different title


def test_a_note_without_a_notebook_resolves_only_qualified_bazaar_links() -> None:
    world = _world([(1, 3, "Soup", None, 1, None),
                    (2, None, "Orphan", "[[Soup]] [[Shared: Soup]]", 2, None)])
    assert world.saver(world.notes[2]) is None
    assert world.links(world.notes[2]) == [("Shared: Soup", 1)]
