"""An in-memory Doughnut 2026 database: the fast twin of the ``doughnut-2026`` profile.

It answers every :class:`graphrag.wiki.model.WikiNeed` as the profile's SQL does (the rules are
written out here from Doughnut's queries, independently of the algorithm), and passes the same
NoteSource contract suite (tests/contracts), so the use cases of the wiki model run against it in
milliseconds:

* ``referrers``: distinct, non-deleted notes with a ``note_wiki_title_cache`` row targeting the note,
  visible when in the target's notebook, or when the viewer owns their notebook through
  ``ownership.user_id`` or subscribes to it; in sampling order (:func:`graphrag.wiki.model.sample_key`);
  the rows the view lacks are read after the lists, as the profile reads them;
* ``peers``: non-deleted notes with the folder id (any notebook), or at the notebook's root;
* ``links``: the targets of the note's rows in row-id order (the target rows the view lacks are
  read in the same load, unless ``eager_links`` is off);
* ``access``: readable = owner, circle member, subscriber or bazaar; inbound-visible = owner through
  ``ownership.user_id`` or subscriber. A circle viewer is a member of that circle owning nothing else.

Every need answered is recorded in :attr:`MemoryWiki.asked`, so tests can count rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from graphrag.core.errors import DatabaseUnavailable
from graphrag.wiki.model import Access, Folder, Notebook, Viewer, WikiNeed, WikiNote, sample_key
from graphrag.wiki.view import WikiView
from service.binding import OLDEST_NOTES, DatabaseIdentity
from service.ports import Cursor, Loader, Piece, TokenOwner
from storage.pieces import by_notebook

__all__ = ["MemoryWiki"]

BASE_MS = 1_785_571_200_000  # 2026-08-01T08:00:00Z


@dataclass
class MemoryWiki:
    """A Doughnut 2026 database in memory, and a :class:`service.ports.NoteSource` over it."""

    profile = "memory-wiki"
    model = "wiki"

    notes: dict[int, WikiNote] = field(default_factory=dict)
    folders: dict[int, Folder] = field(default_factory=dict)
    notebooks: dict[int, Notebook] = field(default_factory=dict)
    rows: list[tuple[int, int, int]] = field(default_factory=list)  # (row id, note id, target id)
    circles: dict[int, set[int]] = field(default_factory=dict)
    subscriptions: set[tuple[int, int]] = field(default_factory=set)  # (user id, notebook id)
    bazaar: set[int] = field(default_factory=set)
    tokens: dict[str, TokenOwner] = field(default_factory=dict)
    eager_links: bool = True
    down: bool = False
    asked: list[WikiNeed] = field(default_factory=list)

    # -- building ---------------------------------------------------------------------------------
    def notebook(self, name: str, *, user: int | None = None, circle: int | None = None) -> int:
        notebook_id = len(self.notebooks) + 1
        owner = Viewer(user_id=user) if circle is None else Viewer(circle_id=circle)
        self.notebooks[notebook_id] = Notebook(notebook_id, name, owner)
        return notebook_id

    def folder(self, notebook_id: int, name: str, parent: int | None = None) -> int:
        folder_id = len(self.folders) + 1
        self.folders[folder_id] = Folder(folder_id, notebook_id, parent, name)
        return folder_id

    def note(
        self,
        title: str,
        notebook_id: int | None,
        folder_id: int | None = None,
        content: str | None = "---\ntype: Note\n---\n",
        *,
        note_id: int | None = None,
        deleted: bool = False,
        created_at_ms: int | None = None,
    ) -> int:
        new_id = note_id if note_id is not None else max(self.notes, default=0) + 1
        created = BASE_MS + 60_000 * new_id if created_at_ms is None else created_at_ms
        self.notes[new_id] = WikiNote(new_id, notebook_id, folder_id, title, content, created, deleted)
        return new_id

    def link(self, source: int, *targets: int) -> None:
        """Cache rows of ``source``, in the given (row id) order."""
        for target in targets:
            self.rows.append((len(self.rows) + 1, source, target))

    def delete(self, note_id: int) -> None:
        note = self.notes[note_id]
        self.notes[note_id] = WikiNote(
            note.id, note.notebook_id, note.folder_id, note.title, note.content, note.created_at_ms, True
        )

    # -- the rules --------------------------------------------------------------------------------
    def access(self, viewer: Viewer, notebook_id: int) -> Access:
        notebook = self.notebooks.get(notebook_id)
        if notebook is None:
            return Access(False, False)
        in_bazaar = notebook_id in self.bazaar
        if viewer.anonymous:
            return Access(in_bazaar, False)
        if viewer.circle_id is not None:
            return Access(notebook.owner.circle_id == viewer.circle_id or in_bazaar, False)
        user = viewer.user_id
        owns_directly = notebook.owner.user_id == user
        owns_by_circle = notebook.owner.circle_id is not None and user in self.circles.get(
            notebook.owner.circle_id, set()
        )
        subscribed = (user, notebook_id) in self.subscriptions
        return Access(
            owns_directly or owns_by_circle or subscribed or in_bazaar, owns_directly or subscribed
        )

    def referrer_ids(self, target: int, seed: int | None, viewer: Viewer) -> list[int]:
        target_note = self.notes.get(target)
        target_notebook = None if target_note is None else target_note.notebook_id
        found = {note for _, note, tgt in self.rows if tgt == target}
        visible = []
        for note_id in found:
            note = self.notes.get(note_id)
            if note is None or note.deleted or note.notebook_id is None:
                continue
            if (
                note.notebook_id == target_notebook
                or self.access(viewer, note.notebook_id).inbound_visible
            ):
                visible.append(note_id)
        return sorted(visible, key=lambda i: sample_key(i, seed))

    def member_ids(self, notebook_id: int | None, folder_id: int | None, seed: int | None) -> list[int]:
        if folder_id is not None:
            members = [n.id for n in self.notes.values() if n.folder_id == folder_id and not n.deleted]
        else:
            members = [
                n.id
                for n in self.notes.values()
                if n.notebook_id == notebook_id and n.folder_id is None and not n.deleted
            ]
        return sorted(members, key=lambda i: sample_key(i, seed))

    def targets(self, note_id: int) -> list[int]:
        return [tgt for _, note, tgt in sorted(self.rows) if note == note_id]

    # -- loading ----------------------------------------------------------------------------------
    def loader(self, view: WikiView) -> Callable[[WikiNeed], None]:
        def load(need: WikiNeed) -> None:
            self.asked.append(need)
            self.load(view, need)

        return load

    # -- the NoteSource port ----------------------------------------------------------------------
    def _check(self) -> None:
        if self.down:
            raise DatabaseUnavailable("database unreachable: the in-memory source is switched off")

    def check(self) -> None:
        self._check()

    def ping(self) -> None:
        self._check()

    @contextmanager
    def batch(self) -> Iterator[Loader]:
        self._check()

        def load(view: WikiView, need: WikiNeed) -> None:
            self._check()
            self.asked.append(need)
            self.load(view, need)

        yield load

    def edit_scope(self, roots: Iterable[int], *, limit: int = 10_000) -> set[int]:
        return set(roots)

    def referrers_of(self, ids: Iterable[int]) -> dict[int, set[int]]:
        """Every note with a link row to each id, deleted or not."""
        self._check()
        wanted = set(ids)
        out: dict[int, set[int]] = {i: set() for i in wanted}
        for _, note, target in self.rows:
            if target in wanted:
                out[target].add(note)
        return out

    def access_reach(self, notebooks: Iterable[int], circles: Iterable[int],
                     ownerships: Iterable[int]) -> tuple[set[int], set[int]]:
        """As the SQL profile; an ownership's id is its notebook's here (tests/storage/wiki_rows)."""
        self._check()
        held = set(circles)
        books = set(notebooks) | set(ownerships) & set(self.notebooks) | {
            i for i, nb in self.notebooks.items() if nb.owner.circle_id in held}
        live = {i for i, n in self.notes.items() if not n.deleted and n.notebook_id in books}
        return books, {target for _, source, target in self.rows if source in live}

    def token_owner(self, token: str) -> TokenOwner | None:
        self._check()
        # utf8mb4_unicode_ci: case and trailing spaces do not count (the SQL profile's comparison)
        wanted = token.rstrip(" ").casefold()
        return next((owner for t, owner in self.tokens.items() if t.rstrip(" ").casefold() == wanted),
                    None)

    def live_ids_after(self, after_id: int, limit: int) -> list[int]:
        self._check()
        return sorted(i for i, n in self.notes.items() if i > after_id and not n.deleted)[:limit]

    def workspaces(self, max_notes: int, *, after: Cursor = None) -> Iterator[Piece]:
        self._check()
        return by_notebook(((i, n.notebook_id) for i, n in self.notes.items() if not n.deleted),
                           max_notes, after)

    def count_live(self) -> int:
        self._check()
        return sum(not n.deleted for n in self.notes.values())

    def any_note(self) -> bool:
        self._check()
        return bool(self.notes)

    def identity(self) -> DatabaseIdentity:
        oldest = sorted(self.notes.values(), key=lambda n: n.id)[:OLDEST_NOTES]
        return DatabaseIdentity.of(self.profile, "memory",
                                   [(n.id, str(n.created_at_ms)) for n in oldest])

    def load(self, view: WikiView, need: WikiNeed) -> None:
        named, sampled = set(need.notes), set[int]()
        for folder_id in need.folders:
            self._put_folder_chain(view, folder_id)
        view.put_notebooks(self.notebooks[i] for i in need.notebooks if i in self.notebooks)
        view.put_absent_notebooks(need.notebooks)
        for note_id in need.links:
            targets = self.targets(note_id)
            view.put_links(note_id, targets)
            named.update(targets if self.eager_links else ())
        for (target, seed, viewer), length in need.referrers:
            ids = self.referrer_ids(target, seed, viewer)
            sampled.update(ids[:length])
            view.put_referrers((target, seed, viewer), ids[:length], len(ids) < length)
        for key, length in need.peers:
            members = self.member_ids(*key)
            sampled.update(members[:length])
            view.put_peers(key, members[:length], len(members) < length)
        for viewer, notebook_id in need.access:
            view.put_access(viewer, notebook_id, self.access(viewer, notebook_id))
        self._put_notes(view, named | sampled, live=sampled)

    def _put_notes(self, view: WikiView, ids: set[int], *, live: set[int]) -> None:
        """As the profile reads rows: those the view lacks, and sampled ones it holds as absent."""
        wanted = view.unread_notes(ids, live=live)
        view.put_notes(self.notes[i] for i in wanted if i in self.notes)
        view.put_absent_notes(wanted)

    def _put_folder_chain(self, view: WikiView, folder_id: int | None) -> None:
        seen: set[int] = set()
        while folder_id is not None and folder_id not in seen:
            seen.add(folder_id)
            folder = self.folders.get(folder_id)
            if folder is None:
                view.put_absent_folders([folder_id])
                return
            view.put_folders([folder])
            folder_id = folder.parent_folder_id


