"""Every Redis key the service uses, built in this one module (docs/redis.md).

Layout (``<prefix>`` defaults to ``graphrag:v1``; tests pass their own to isolate themselves)::

    <prefix>:snap:{<note_id>}:<strategy>:<seed>[:<tokenLimit>]   snapshot envelope (orjson bytes);
                                                                 <seed> is ``none`` for seedless
    <prefix>:gen:{<note_id>}                                     generation counter of the note
    <prefix>:dep:{<note_id>}                                     set of focus ids whose snapshots show it
    <prefix>:dep:{<kind>:<id>}                                   the same for a wiki fact (note:5)
    <prefix>:vdep:{<note_id>|<kind>:<id>}                         set of foci a reader keeps a viewer's
                                                                 own view of that read it (expires)
    <prefix>:shows:{<note_id>}                                   hash: snapshot key -> ids it shows
    <prefix>:touched:{<note_id>}                                 seq number of the note's last edit
    <prefix>:lock:{<note_id>}:<strategy>:<seed>[:<tokenLimit>]   short live-compute lock of one snapshot
    <prefix>:refresh:{<note_id>}                                 "a refresh is queued" marker
    <prefix>:seq                                                 global edit sequence (the edit race)
    <prefix>:dirty:{d<shard>}:urgent|near|wide                   sorted sets of focus ids to rebuild
    <prefix>:dirty:{d<shard>}:leases                             hash: ids a drain has in hand
    <prefix>:dirty:shards                                        the shard count last re-homed for
    <prefix>:webhook:<webhook_id>                                replay guard of one webhook delivery
    <prefix>:progress:<name>                                     hash: progress of a full rebuild
    <prefix>:flag:<name>                                         short-lived coordination flags
    <prefix>:binding                                             the database the prefix belongs to

The ``{<note_id>}`` hash tag puts all keys *of one note* into one Redis Cluster slot, so a Lua script
that touches a note's snapshot, generation and ``shows`` hash is cluster-legal. The layered strategy
adds ``:<tokenLimit>`` (its snapshots are stored per configured limit); the prefix-sliceable
strategies store one snapshot at the maximum tokenLimit and leave it off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_PREFIX", "Keys"]

DEFAULT_PREFIX = "graphrag:v1"


_FACT = re.compile(r"\A[a-z]+:[0-9a-z:]+\Z")


def _fact_tag(fact: int | str) -> str:
    """The hash tag of a reverse-index fact: a note id (tree model), or a wiki fact such as
    ``note:5``, ``links:5``, ``peers:3:root`` (letters, digits and colons only)."""
    if isinstance(fact, str):
        if not _FACT.match(fact):
            raise ValueError(f"a fact is a note id or kind:id, got {fact!r}")
        return "{" + fact + "}"
    return _tag(fact)


def _tag(note_id: int) -> str:
    if isinstance(note_id, bool) or not isinstance(note_id, int) or note_id < 0:
        raise ValueError(f"note id must be a non-negative int, got {note_id!r}")
    return "{" + str(note_id) + "}"


def _variant(strategy: str, seed: int | None, token_limit: int | None) -> str:
    if not strategy or ":" in strategy or "{" in strategy:
        raise ValueError(f"strategy must be a plain name, got {strategy!r}")
    suffix = f"{strategy}:{'none' if seed is None else int(seed)}"
    return suffix if token_limit is None else f"{suffix}:{int(token_limit)}"


@dataclass(frozen=True, slots=True)
class Keys:
    """Every key builder, bound to one prefix (what the store and tasks carry around)."""

    prefix: str = DEFAULT_PREFIX

    def snapshot(self, note_id: int, strategy: str, seed: int | None,
                 token_limit: int | None = None) -> str:
        """``<prefix>:snap:{id}:<strategy>:<seed>``, plus ``:<tokenLimit>`` for per-limit (layered)."""
        return f"{self.prefix}:snap:{_tag(note_id)}:{_variant(strategy, seed, token_limit)}"

    def generation(self, note_id: int) -> str:
        """``<prefix>:gen:{id}``: the note's generation counter (compare-and-set of every write)."""
        return f"{self.prefix}:gen:{_tag(note_id)}"

    def dep(self, note_id: int | str) -> str:
        """``<prefix>:dep:{id}``: integer ids of the foci whose snapshot (any variant) shows the note."""
        return f"{self.prefix}:dep:{_fact_tag(note_id)}"

    def view_dep(self, note_id: int | str) -> str:
        """``<prefix>:vdep:{id}``: foci a reader keeps a viewer's own view of that read the note or
        fact (service.reader.viewer_reads), apart from ``dep``, which is exactly what snapshots show."""
        return f"{self.prefix}:vdep:{_fact_tag(note_id)}"

    def shows(self, note_id: int) -> str:
        """``<prefix>:shows:{id}``: hash of the focus's snapshot keys -> the note ids each one shows."""
        return f"{self.prefix}:shows:{_tag(note_id)}"

    def touched(self, note_id: int | str) -> str:
        """``<prefix>:touched:{id}``: the ``seq`` number stamped by the note's latest edit event."""
        return f"{self.prefix}:touched:{_fact_tag(note_id)}"

    def lock(self, note_id: int, strategy: str, seed: int | None,
             token_limit: int | None = None) -> str:
        """``<prefix>:lock:{id}:<strategy>:<seed>[:<tokenLimit>]``: one snapshot's live-compute lock."""
        return f"{self.prefix}:lock:{_tag(note_id)}:{_variant(strategy, seed, token_limit)}"

    def refresh(self, note_id: int) -> str:
        """``<prefix>:refresh:{id}``: set while a stale-triggered refresh of the note is queued."""
        return f"{self.prefix}:refresh:{_tag(note_id)}"

    def changed(self, note_id: int) -> str:
        """``<prefix>:changed:{id}``: the shard channel that hears of every write or deletion of
        the note's snapshots (published by the CAS scripts, in the note's slot)."""
        return f"{self.prefix}:changed:{_tag(note_id)}"

    def seq(self) -> str:
        """``<prefix>:seq``: the global edit sequence counter."""
        return f"{self.prefix}:seq"

    def dirty(self, shard: int, lane: str) -> str:
        """``<prefix>:dirty:{d<shard>}:urgent|near|wide``: one lane of one shard of the foci
        waiting for a rebuild (every lane of a shard in one slot)."""
        return f"{self.prefix}:dirty:{{d{int(shard)}}}:{lane}"

    def dirty_leases(self, shard: int) -> str:
        """``<prefix>:dirty:{d<shard>}:leases``: the ids of one shard a drain has in hand, each with
        its lease's expiry and the score it was taken with (the lanes' slot)."""
        return f"{self.prefix}:dirty:{{d{int(shard)}}}:leases"

    def dirty_shards(self) -> str:
        """``<prefix>:dirty:shards``: the shard count the dirty set was last re-homed for."""
        return f"{self.prefix}:dirty:shards"

    def legacy_dirty(self) -> str:
        """``<prefix>:dirty``: the unsharded set of earlier versions (adopted into the shards)."""
        return f"{self.prefix}:dirty"

    def progress(self, name: str) -> str:
        """``<prefix>:progress:<name>``: a hash recording a full rebuild's progress."""
        return f"{self.prefix}:progress:{name}"

    def cdc_position(self) -> str:
        """``<prefix>:cdc:position``: change capture's place in the database's log (no TTL)."""
        return f"{self.prefix}:cdc:position"

    def access_epoch(self) -> str:
        """``<prefix>:cdc:access``: how many transactions changing access rows change capture has
        read (service.access; no TTL)."""
        return f"{self.prefix}:cdc:access"

    def cdc_heartbeat(self) -> str:
        """``<prefix>:cdc:heartbeat``: change capture's proof of life, "<ms> <behind ms>" (no TTL)."""
        return f"{self.prefix}:cdc:heartbeat"

    def flag(self, name: str) -> str:
        """``<prefix>:flag:<name>``: a short-lived coordination flag (e.g. "a drain is scheduled")."""
        return f"{self.prefix}:flag:{name}"

    def webhook(self, webhook_id: str) -> str:
        """``<prefix>:webhook:<id>``: marks a webhook delivery as seen (replay guard)."""
        return f"{self.prefix}:webhook:{webhook_id}"

    def binding(self) -> str:
        """``<prefix>:binding``: the identity of the database whose snapshots the prefix holds
        (service.binding; no TTL)."""
        return f"{self.prefix}:binding"

    def pattern(self) -> str:
        """A SCAN MATCH pattern covering every key under this prefix."""
        return self.prefix + ":*"
