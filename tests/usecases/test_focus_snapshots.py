"""Focus-context snapshots over in-memory ports: one snapshot answers every tokenLimit, and events
keep every snapshot exact (fast: no service).

A random 2026 graph is rebuilt into snapshots (the seedless order and one seed); reads at many
tokenLimits, in JSON and markdown, must equal a live compute byte for byte and come from the cache
without touching the database. Then a storm of Doughnut-style edits (content edits adding and
removing links, title renames with their referrers rewritten, moves between folders and to the root,
deletes and undo-deletes, folder and notebook renames, new notes), each followed by its event, is
drained; afterwards every snapshot equals a live compute. A control shows the check finds staleness.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from graphrag import CharsCounter, Request, StrategyParams
from graphrag.wiki.focus.strategy import WikiOutcome
from graphrag.wiki.model import Folder, Notebook, Viewer
from service.context import ContextService
from service.decoding import decode_envelope
from service.drain import drain_until
from service.envelope import SnapshotKey
from service.events import record_events
from service.note_event import NoteEvent
from service.reader import ReaderConfig, SnapshotReader
from service.rebuild import RebuildReport, rebuild
from service.viewers import same_view
from storage.memory import MemoryCoordination, MemoryDirtySet, MemoryState
from storage.memory_cache import MemoryCache
from storage.memory_wiki import MemoryWiki
from tests.storage.wiki_rows import random_graph

MAX_LIMIT = 4000
SEEDS = (7,)
SWEEP = (1, 2, 5, 6, 50, 99, 100, 101, 500, 1999, 2000, 2001, MAX_LIMIT)
STRATEGY = "focus-context"


NOW_MS = 1_790_000_000_000


@dataclass
class Wiki:
    db: MemoryWiki
    state: MemoryState = field(default_factory=lambda: MemoryState(clock_ms=lambda: NOW_MS))

    def __post_init__(self) -> None:
        self.cache = MemoryCache(self.state)
        self.dirty = MemoryDirtySet(self.state)
        self.coordination = MemoryCoordination(self.state)
        self.service = ContextService(self.db, CharsCounter(), StrategyParams())

    def rebuild(self, ids: Any) -> RebuildReport:
        return rebuild(self.service, self.cache, ids, strategies=(STRATEGY,), seeds=SEEDS,
                       max_token_limit=MAX_LIMIT, now_ms=NOW_MS)

    def reader(self) -> SnapshotReader:
        config = ReaderConfig(strategies=(STRATEGY,), seeds=SEEDS, max_token_limit=MAX_LIMIT)
        return SnapshotReader(self.service, self.cache, self.coordination, config,
                              clock_ms=lambda: NOW_MS + 1000)

    def live(self, focus: int, limit: int, seed: int | None = None, viewer: Viewer | None = None
             ) -> WikiOutcome:
        outcome = self.service.compute(Request(focus, seed, limit, 0, limit, viewer=viewer), STRATEGY)
        assert isinstance(outcome, WikiOutcome)
        return outcome

    def live_ids(self) -> list[int]:
        return self.db.live_ids_after(0, 10_000)

    def foci(self) -> list[int]:
        """Live notes with a notebook (a note without one has no context for anybody)."""
        return [i for i in self.live_ids() if self.db.notes[i].notebook_id is not None]

    def send(self, *events: NoteEvent) -> None:
        record_events(list(events), self.db, self.cache, self.dirty, sibling_radius=0, now_ms=NOW_MS)

    def drain(self) -> None:
        clock = iter(range(NOW_MS, NOW_MS + 10**9, 1000))
        drain_until(self.dirty, self.rebuild, batch=50, debounce_ms=0, budget_s=10**5,
                    clock_ms=lambda: next(clock))

    def stale(self) -> list[tuple[int, int | None]]:
        """Snapshots that differ from a live compute now (or whose live note is missing one)."""
        out = []
        for focus in self.live_ids():
            for seed in (None, *SEEDS):
                raw = self.cache.read(SnapshotKey(focus, STRATEGY, seed))
                env = decode_envelope(raw)
                try:
                    want = self.live(focus, env.result_limit if env else 2000, seed).to_json()
                except Exception:
                    continue
                if env is None or env.result_json != want:
                    out.append((focus, seed))
        return out


@pytest.fixture
def wiki() -> Iterator[Wiki]:
    w = Wiki(random_graph(5, notes=50))
    report = w.rebuild(w.live_ids())
    assert report.errors == {}
    yield w


def test_one_snapshot_answers_every_token_limit_in_json_and_markdown(wiki: Wiki) -> None:
    reader = wiki.reader()
    for focus in wiki.foci()[:25]:
        for seed in (None, *SEEDS):
            asked = len(wiki.db.asked)
            for limit in SWEEP:
                want = wiki.live(focus, limit, seed)
                served = reader.get(focus, token_limit=limit, seed=seed)
                assert (served.source, served.body) == ("cache", want.to_json()), (focus, limit)
                md = reader.get(focus, token_limit=limit, seed=seed, fmt="markdown")
                assert (md.source, md.text, md.body) == ("cache", want.markdown(),
                                                         want.markdown_json())
            wiki.db.asked[asked:] = []  # the live computes above asked; the reads did not


def test_a_fresh_hit_reads_nothing_from_the_database(wiki: Wiki) -> None:
    reader = wiki.reader()
    foci = wiki.foci()[:10]
    wiki.db.down = True
    for focus in foci:
        assert reader.get(focus).source == "cache"
        assert reader.get(focus, token_limit=777, fmt="markdown").source == "cache"


def test_other_viewers_and_seeds_are_proven_or_live_and_never_cached(wiki: Wiki) -> None:
    """Another viewer gets the snapshot only where service.viewers proves it the same answer."""
    reader = wiki.reader()
    focus = wiki.foci()[0]
    owner = Viewer(user_id=1)
    assert reader.get(focus, viewer=owner).source == "cache"  # the snapshot is the owner's view
    other = Viewer(user_id=2)
    note = wiki.db.notes[focus]
    if wiki.db.access(other, note.notebook_id or 0).readable:
        served = reader.get(focus, viewer=other)
        proven = same_view(wiki.db, wiki.live(focus, 2000).depends_on(), owner, other)
        assert (served.source, served.body) == ("cache" if proven else "live",
                                                wiki.live(focus, 2000, viewer=other).to_json())
    assert reader.get(focus, seed=12345).source == "live"
    assert wiki.cache.read(SnapshotKey(focus, STRATEGY, 12345)) is None


# -- the edit storm ---------------------------------------------------------------------------------
@dataclass
class Storm:
    wiki: Wiki
    rng: random.Random
    row_id: int = 10_000

    @property
    def db(self) -> MemoryWiki:
        return self.wiki.db

    def targets(self, note: int) -> tuple[int, ...]:
        return tuple(self.db.targets(note))

    def relink(self, note: int, targets: list[int]) -> None:
        before = self.targets(note)
        self.db.rows[:] = [r for r in self.db.rows if r[1] != note]
        for t in targets:
            self.row_id += 1
            self.db.rows.append((self.row_id, note, t))
        content = f"---\ntype: Note\n---\nedited {self.row_id}"
        self.db.notes[note] = dataclasses.replace(self.db.notes[note], content=content)
        self.wiki.send(NoteEvent("note.updated", note, before_links=before,
                                 after_links=self.targets(note)))

    def rename(self, note: int) -> None:
        self.db.notes[note] = dataclasses.replace(self.db.notes[note], title=f"R{self.row_id}")
        self.row_id += 1
        events = [NoteEvent("note.updated", note)]
        referrers = {r for _, r, t in self.db.rows if t == note}
        events += [NoteEvent("note.updated", r, before_links=self.targets(r),
                             after_links=self.targets(r)) for r in referrers]
        self.wiki.send(*events)

    def move(self, note: int) -> None:
        row = self.db.notes[note]
        folders = [f.id for f in self.db.folders.values() if f.notebook_id == row.notebook_id]
        folder = self.rng.choice([None, *folders])
        self.db.notes[note] = dataclasses.replace(row, folder_id=folder)
        self.wiki.send(NoteEvent("note.moved", note, before_folder_id=row.folder_id,
                                 after_folder_id=folder, before_notebook_id=row.notebook_id,
                                 after_notebook_id=row.notebook_id))

    def toggle_delete(self, note: int) -> None:
        row = self.db.notes[note]
        self.db.notes[note] = dataclasses.replace(row, deleted=not row.deleted)
        kind = "note.restored" if row.deleted else "note.deleted"
        self.wiki.send(NoteEvent(kind, note, before_folder_id=row.folder_id,
                                 before_notebook_id=row.notebook_id))

    def rename_folder(self) -> None:
        folder = self.rng.choice(list(self.db.folders.values()))
        self.db.folders[folder.id] = Folder(folder.id, folder.notebook_id, folder.parent_folder_id,
                                            f"{folder.name}+")
        self.wiki.send(NoteEvent("folder.renamed", None, folder_id=folder.id))

    def rename_notebook(self) -> None:
        book = self.rng.choice(list(self.db.notebooks.values()))
        self.db.notebooks[book.id] = Notebook(book.id, f"{book.name}+", book.owner)
        self.wiki.send(NoteEvent("notebook.renamed", None, notebook_id=book.id))

    def create(self) -> None:
        book = self.rng.choice(list(self.db.notebooks))
        folders = [f.id for f in self.db.folders.values() if f.notebook_id == book]
        note = self.db.note(f"New{self.row_id}", book, self.rng.choice([None, *folders]))
        self.row_id += 1
        targets = self.rng.sample(list(self.db.notes), 2)
        for t in targets:
            self.row_id += 1
            self.db.rows.append((self.row_id, note, t))
        row = self.db.notes[note]
        self.wiki.send(NoteEvent("note.created", note, after_folder_id=row.folder_id,
                                 after_notebook_id=book, after_links=self.targets(note)))

    def step(self) -> None:
        notes = list(self.db.notes)
        note = self.rng.choice(notes)
        action = self.rng.randrange(8)
        if action == 0:
            self.relink(note, self.rng.sample(notes, self.rng.randrange(4)))
        elif action == 1:
            self.rename(note)
        elif action == 2 and self.db.notes[note].notebook_id is not None:
            self.move(note)
        elif action == 3:
            self.toggle_delete(note)
        elif action == 4:
            self.rename_folder()
        elif action == 5:
            self.rename_notebook()
        else:
            self.create()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_after_an_edit_storm_every_snapshot_equals_a_live_compute(wiki: Wiki, seed: int) -> None:
    storm = Storm(wiki, random.Random(seed))
    for _ in range(60):
        storm.step()
        if storm.rng.random() < 0.3:
            wiki.drain()
    wiki.drain()
    assert wiki.dirty.size() == 0
    assert wiki.stale() == []
    checked = sum(wiki.cache.read(SnapshotKey(f, STRATEGY, None)) is not None for f in wiki.foci())
    assert checked > 40


EDITS = {
    "relink": lambda storm: storm.relink(3, [5, 6]),
    "rename": lambda storm: storm.rename(2),
    "move": lambda storm: storm.move(1),
    "folder": lambda storm: storm.rename_folder(),
    "notebook": lambda storm: storm.rename_notebook(),
    "delete": lambda storm: storm.toggle_delete(2),
    "create": lambda storm: storm.create(),
}


@pytest.mark.parametrize("kind", sorted(EDITS))
def test_the_check_finds_each_kind_of_staleness_and_the_event_repairs_it(wiki: Wiki, kind: str) -> None:
    """The control: an edit without its event leaves snapshots that differ; with it, none."""
    sent: list[NoteEvent] = []
    real_send = wiki.send
    wiki.send = lambda *events: sent.extend(events)  # type: ignore[method-assign]
    for attempt in range(5):  # a random folder, notebook or new note may touch no snapshot
        EDITS[kind](Storm(wiki, random.Random(attempt)))
        if wiki.stale():
            break
    assert wiki.stale(), f"a {kind} without its event went unnoticed"
    real_send(*sent)
    wiki.drain()
    assert wiki.stale() == []


def test_the_audit_recomputes_trace_snapshots_and_finds_staleness(wiki: Wiki) -> None:
    from service.audit import audit

    clean = audit(wiki.service, wiki.cache, sample=500, now_ms=NOW_MS, rng=random.Random(1))
    assert clean.sampled > 40 and clean.stale == 0
    Storm(wiki, random.Random(2)).rename(2)  # the hub, shown by many snapshots
    wiki.send = lambda *events: None  # type: ignore[method-assign]
    Storm(wiki, random.Random(3)).rename(2)
    stale = audit(wiki.service, wiki.cache, sample=500, now_ms=NOW_MS, rng=random.Random(1))
    assert stale.stale > 0 and stale.worst[0].reason in ("related notes differ", "content differs")


def test_a_cut_through_an_emoji_is_stored_and_served_as_doughnut_writes_it(wiki: Wiki) -> None:
    """Doughnut's Java cut may keep the first half of a UTF-16 pair; Jackson then writes it as a
    lone ``\\uD83D`` escape. The snapshot keeps and serves exactly that, in JSON and markdown."""
    focus = wiki.foci()[0]
    note = wiki.db.notes[focus]
    wiki.db.notes[focus] = dataclasses.replace(note, content="ab" + "\U0001F369" * 2000)
    wiki.rebuild([focus])
    reader = wiki.reader()
    halves = 0
    for limit in range(6, 60):
        want = wiki.live(focus, limit)
        halves += b"\\uD83C" in want.to_json()
        served = reader.get(focus, token_limit=limit)
        assert (served.source, served.body) == ("cache", want.to_json()), limit
        md = reader.get(focus, token_limit=limit, fmt="markdown")
        assert (md.source, md.body) == ("cache", want.markdown_json())
    assert halves > 0  # some of those tokenLimits cut a pair in half
    env = decode_envelope(wiki.cache.read(SnapshotKey(focus, STRATEGY, None)))
    assert env is not None and decode_envelope(env.encode()) == env
    assert b"\\uD83C" in env.result_json  # the stored cut, too


def test_a_packed_trace_that_does_not_inflate_is_computed_live_and_its_result_still_served(
    wiki: Wiki,
) -> None:
    """The default read never inflates the trace; a read that needs it finds it broken (its
    checksum does not match) and computes live instead of replaying garbage, writing back a
    snapshot that serves the next reads."""
    focus, key = wiki.foci()[0], SnapshotKey(wiki.foci()[0], STRATEGY, None)
    raw = wiki.cache.read(key)
    assert raw is not None
    header, _, stream = raw.partition(b"\n")
    broken = header + b"\n" + stream[:-1] + bytes([stream[-1] ^ 1])  # the trace's checksum
    wiki.state.snapshots[key] = (broken, wiki.state.snapshots[key][1])
    reader = wiki.reader()
    served = reader.get(focus, token_limit=2000)
    assert (served.source, served.body) == ("cache", wiki.live(focus, 2000).to_json())
    md = reader.get(focus, token_limit=2000, fmt="markdown")
    assert (md.source, md.body) == ("live", wiki.live(focus, 2000).markdown_json())
    assert wiki.cache.read(key) != broken  # written back whole
    for limit in (5, 1999, MAX_LIMIT):
        served = reader.get(focus, token_limit=limit)
        assert (served.source, served.body) == ("cache", wiki.live(focus, limit).to_json())


def test_a_snapshot_is_stored_packed_in_a_fraction_of_its_json(wiki: Wiki) -> None:
    for focus in wiki.foci()[:10]:
        raw = wiki.cache.read(SnapshotKey(focus, STRATEGY, None))
        env = decode_envelope(raw)
        assert raw is not None and env is not None and env.trace_bytes is not None
        assert raw is not None and env.trace is not None and b"\n" in raw
        as_json = len(env.result_json) + len(orjson.dumps(env.trace.to_json()))
        assert len(raw.partition(b"\n")[2]) < as_json / 2  # (the header is the same in both)
