"""Every Redis key the service uses, built in this one module (DESIGN §4).

Layout (``<prefix>`` defaults to ``graphrag:v1``; tests pass their own to isolate themselves)::

    <prefix>:snap:{<note_id>}:<strategy>:<seed>[:<tokenLimit>]   snapshot envelope (orjson bytes)
    <prefix>:gen:{<note_id>}                                     generation counter of the note
    <prefix>:dep:{<note_id>}                                     set of focus ids whose snapshots show it
    <prefix>:shows:{<note_id>}                                   hash: snapshot key -> ids it shows
    <prefix>:touched:{<note_id>}                                 seq number of the note's last edit
    <prefix>:lock:{<note_id>}:<strategy>:<seed>[:<tokenLimit>]   short live-compute lock of one snapshot
    <prefix>:refresh:{<note_id>}                                 "a refresh is queued" marker
    <prefix>:seq                                                 global edit sequence (DESIGN §4 race)
    <prefix>:dirty                                               sorted set of focus ids to rebuild
    <prefix>:webhook:<webhook_id>                                replay guard of one webhook delivery
    <prefix>:progress:<name>                                     hash: progress of a full rebuild
    <prefix>:flag:<name>                                         short-lived coordination flags

The ``{<note_id>}`` hash tag puts all keys *of one note* into one Redis Cluster slot, so a Lua script
that touches a note's snapshot, generation and ``shows`` hash is cluster-legal. The layered strategy
adds ``:<tokenLimit>`` (its snapshots are stored per configured limit); the prefix-sliceable
strategies store one snapshot at the maximum tokenLimit and leave it off.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "DEFAULT_PREFIX",
    "Keys",
    "dep_key",
    "dirty_key",
    "flag_key",
    "generation_key",
    "lock_key",
    "progress_key",
    "refresh_key",
    "seq_key",
    "shows_key",
    "snapshot_key",
    "touched_key",
    "webhook_key",
]

DEFAULT_PREFIX = "graphrag:v1"


def _tag(note_id: int) -> str:
    if isinstance(note_id, bool) or not isinstance(note_id, int) or note_id < 0:
        raise ValueError(f"note id must be a non-negative int, got {note_id!r}")
    return "{" + str(note_id) + "}"


def _variant(strategy: str, seed: int, token_limit: int | None) -> str:
    if not strategy or ":" in strategy or "{" in strategy:
        raise ValueError(f"strategy must be a plain name, got {strategy!r}")
    suffix = f"{strategy}:{int(seed)}"
    return suffix if token_limit is None else f"{suffix}:{int(token_limit)}"


def snapshot_key(
    note_id: int, strategy: str, seed: int, token_limit: int | None = None, *,
    prefix: str = DEFAULT_PREFIX,
) -> str:
    """``<prefix>:snap:{id}:<strategy>:<seed>``, plus ``:<tokenLimit>`` for per-limit (layered) ones."""
    return f"{prefix}:snap:{_tag(note_id)}:{_variant(strategy, seed, token_limit)}"


def generation_key(note_id: int, *, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:gen:{id}``: the note's generation counter (compare-and-set of every write)."""
    return f"{prefix}:gen:{_tag(note_id)}"


def dep_key(note_id: int, *, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:dep:{id}``: integer ids of the foci whose snapshot (any variant) shows the note."""
    return f"{prefix}:dep:{_tag(note_id)}"


def shows_key(note_id: int, *, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:shows:{id}``: hash of the focus's snapshot keys -> the note ids each one shows."""
    return f"{prefix}:shows:{_tag(note_id)}"


def touched_key(note_id: int, *, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:touched:{id}``: the ``seq`` number stamped by the note's latest edit event."""
    return f"{prefix}:touched:{_tag(note_id)}"


def lock_key(
    note_id: int, strategy: str, seed: int, token_limit: int | None = None, *,
    prefix: str = DEFAULT_PREFIX,
) -> str:
    """``<prefix>:lock:{id}:<strategy>:<seed>[:<tokenLimit>]``: one snapshot's live-compute lock."""
    return f"{prefix}:lock:{_tag(note_id)}:{_variant(strategy, seed, token_limit)}"


def refresh_key(note_id: int, *, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:refresh:{id}``: set while a stale-triggered refresh of the note is queued."""
    return f"{prefix}:refresh:{_tag(note_id)}"


def seq_key(*, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:seq``: the global edit sequence counter."""
    return f"{prefix}:seq"


def dirty_key(*, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:dirty``: sorted set of focus ids waiting for a rebuild."""
    return f"{prefix}:dirty"


def progress_key(name: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:progress:<name>``: a hash recording a full rebuild's progress."""
    return f"{prefix}:progress:{name}"


def flag_key(name: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:flag:<name>``: a short-lived coordination flag (e.g. "a drain is scheduled")."""
    return f"{prefix}:flag:{name}"


def webhook_key(webhook_id: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    """``<prefix>:webhook:<id>``: marks a webhook delivery as seen (replay guard)."""
    return f"{prefix}:webhook:{webhook_id}"


@dataclass(frozen=True, slots=True)
class Keys:
    """The same key builders bound to one prefix (what the store and tasks carry around)."""

    prefix: str = DEFAULT_PREFIX

    def snapshot(self, note_id: int, strategy: str, seed: int, token_limit: int | None = None) -> str:
        return snapshot_key(note_id, strategy, seed, token_limit, prefix=self.prefix)

    def generation(self, note_id: int) -> str:
        return generation_key(note_id, prefix=self.prefix)

    def dep(self, note_id: int) -> str:
        return dep_key(note_id, prefix=self.prefix)

    def shows(self, note_id: int) -> str:
        return shows_key(note_id, prefix=self.prefix)

    def touched(self, note_id: int) -> str:
        return touched_key(note_id, prefix=self.prefix)

    def lock(self, note_id: int, strategy: str, seed: int, token_limit: int | None = None) -> str:
        return lock_key(note_id, strategy, seed, token_limit, prefix=self.prefix)

    def refresh(self, note_id: int) -> str:
        return refresh_key(note_id, prefix=self.prefix)

    def seq(self) -> str:
        return seq_key(prefix=self.prefix)

    def dirty(self) -> str:
        return dirty_key(prefix=self.prefix)

    def progress(self, name: str) -> str:
        return progress_key(name, prefix=self.prefix)

    def flag(self, name: str) -> str:
        return flag_key(name, prefix=self.prefix)

    def webhook(self, webhook_id: str) -> str:
        return webhook_key(webhook_id, prefix=self.prefix)

    def pattern(self) -> str:
        """A SCAN MATCH pattern covering every key under this prefix."""
        return self.prefix + ":*"
