"""The report's sections for today's Doughnut, the RabbitMQ broker and change capture.

Each renders one section of ``latest.json`` as markdown, or nothing when the run did not measure it
(``--only``, or an older run).
"""

from __future__ import annotations

from typing import Any

__all__ = ["broker_lines", "cdc_lines", "cluster_lines", "today_lines"]


def _fmt(value: Any) -> str:
    if value is None:  # (a figure an older run did not measure)
        return "–"
    return f"{value:,.0f}" if isinstance(value, int | float) and abs(value) >= 100 else f"{value:.3g}"


def today_lines(r: dict[str, Any]) -> list[str]:
    x = r.get("today")
    if not x:
        return []
    b, m = x["rebuild"], x["memory"]
    return ["## Today's Doughnut (focus-context)", "",
            f"`{x['database']}`: {x['counts']['note']:,} notes, "
            f"{x['counts']['note_wiki_title_cache']:,} link rows, {x['counts']['folder']:,} folders. "
            f"Live compute at tokenLimit 2000 over {x['live_notes']} foci: p50 {_fmt(x['live_p50_ms'])} "
            f"ms, p95 {_fmt(x['live_p95_ms'])} ms. SQL statements per context: "
            f"{_fmt(x['sql_per_context_batched'])} batched (100 foci per batch) against "
            f"{_fmt(x['sql_per_context_one_at_a_time'])} one focus at a time.", "",
            f"Rebuild (one process, seedless order and one seed): {_fmt(b['snapshots_per_s'])} "
            f"snapshots/s, {_fmt(b['sql_per_snapshot'])} SQL per snapshot. Redis: "
            f"{_fmt(m['bytes_per_snapshot'])} B per snapshot with its trace (every tokenLimit up to "
            f"the maximum answerable from it), {_fmt(m['all_bytes_per_snapshot'])} B with the fact "
            f"index; the reverse index (`dep:*`) is {m['dep_index_share'] * 100:.1f}%. The snapshot is "
            f"stored packed: a JSON header line, then a zstd frame of the result and one of the trace.",
            "",
            *_read_lines(x.get("reads") or {}), *_user_lines(x.get("users") or {}),
            *_doughnut_read_lines(r.get("doughnut_reads") or {})]


_KIND_NAMES = {"owner_default": "the owner, tokenLimit 2000 (the stored result)",
               "owner_any": "the owner, a random tokenLimit 1–20,000",
               "subscriber": "a subscriber, a random tokenLimit",
               "circle": "a circle member, a random tokenLimit",
               "bazaar_anonymous": "no token, a bazaar note, a random tokenLimit"}


def _doughnut_read_lines(reads: dict[str, Any]) -> list[str]:
    """Doughnut's own read by each kind of reader, in process (ops.bench.doughnut_reads)."""
    rows = [(k, reads[k]) for k in _KIND_NAMES if k in reads]
    if not rows:
        return []
    lines = ["| reader | reads | p50 (µs) | p99 (µs) | p50 / the owner's default | SQL per read |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {_KIND_NAMES[k]} | {r['reads']:,} | {_fmt(r['p50_us'])} | {_fmt(r['p99_us'])} | "
              f"{r['ratio_p50']:.2f} | {r['sql_per_read']:.2f} |" for k, r in rows]
    return ["Doughnut's own read (`GET /api/notes/{id}/graph` with a user's token, through the "
            "path's parsing, the token's user and the read rule), in process, warmed up, the "
            "kinds timed side by side in alternating rounds:", "",
            *lines, "", *_http_lines(rows)]


def _http_lines(rows: list[tuple[str, Any]]) -> list[str]:
    """The same reads over HTTP at a fixed rate (ops.bench.doughnut_http)."""
    http = [(k, r["http"]) for k, r in rows if r.get("http")]
    if not http:
        return []
    lines = ["| reader | reads | rate (req/s) | p50 (µs) | p99 (µs) | p50 / the owner's default | "
             "SQL per read | answered from |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {_KIND_NAMES[k]} | {r['reads']:,} | {r['rate_per_s']:.0f} | {_fmt(r['p50_us'])} | "
              f"{_fmt(r['p99_us'])} | {r['ratio_p50']:.2f} | {r['sql_per_read']:.2f} | "
              f"{_answered_from(r.get('sources'))} |" for k, r in http]
    return ["The same reads over HTTP, one `graphrag serve` (`GRAPHRAG_READER_AUTH=doughnut`) at "
            "about 300 requests/s (wrk, open rate), warmed up, the kinds timed side by side in "
            "alternating 1 s slices; SQL counted by the server (`Com_select`):", "", *lines, ""]


def _answered_from(sources: dict[str, int] | None) -> str:
    """How the server's reader answered a kind's reads (older runs did not count them)."""
    if not sources:
        return "n/a"
    return ", ".join(f"{name.replace('_', ' ')} {count:,}" for name, count in sources.items())


def _read_lines(reads: dict[str, Any]) -> list[str]:
    """The owner's reads in process: the stored result, a replay, a bare client's read."""
    if not reads:
        return []
    return [f"Reads in process ({reads['reads']:,} of each): a hit at tokenLimit 2000 (the stored "
            f"result, decompressed) p50 {_fmt(reads['hit_p50_us'])} µs; at tokenLimit "
            f"{reads['other_limit']} {_fmt(reads['other_limit_p50_us'])} µs "
            f"(a note's first read there replays its trace, inflating and parsing it: "
            f"{_fmt(reads.get('other_limit_first_p50_us'))} µs; the same read again takes the "
            f"answer the process kept); "
            f"a bare GET + header + decompress + parse of the result "
            f"{_fmt(reads['raw_get_p50_us'])} µs.",
            ""]


def _user_lines(users: dict[str, Any]) -> list[str]:
    """Another user's reads (a subscriber, a circle member): share from snapshots and latency."""
    if not users:
        return []
    lines = ["| reader | reads | from the owner's snapshot | p50 (ms) | p95 (ms) |",
             "|---|---|---|---|---|"]
    lines += [f"| a {kind} (user {u['user']}, notebook {u['notebook']}) | {u['reads']} | "
              f"{u['from_snapshots'] * 100:.0f}% | {_fmt(u['p50_ms'])} | {_fmt(u['p95_ms'])} |"
              for kind, u in users.items()]
    return ["Reads by other users than the owner, as themselves (Doughnut's own paths): served from "
            "the owner's snapshot where the reads that depend on the viewer are proven the same, "
            "computed live otherwise.", "", *lines, ""]


def cluster_lines(r: dict[str, Any]) -> list[str]:
    x = r.get("invalidation_cluster")
    if not x:
        return []
    return ["## Redis Cluster", "",
            f"The invalidation measurement again with the snapshots, dirty set and locks in a local "
            f"{x['primaries']}-primary Redis Cluster (broker: the single Redis): single edits p50 "
            f"{_fmt(x['p50_ms'])} ms, p95 {_fmt(x['p95_ms'])} ms, {x['timeouts']} timeouts; burst of "
            f"{x['burst_edits']:,} edits settled after {_fmt(x['burst_1000_s'])} s.", ""]


def broker_lines(r: dict[str, Any]) -> list[str]:
    x, redis = r.get("invalidation_rabbitmq"), r.get("invalidation")
    if not x:
        return []
    against = (f" (Redis broker in the same run: p50 {_fmt(redis['p50_ms'])} ms, p95 "
               f"{_fmt(redis['p95_ms'])} ms, burst {_fmt(redis['burst_1000_s'])} s)") if redis else ""
    return ["## RabbitMQ broker", "",
            f"The invalidation measurement again with RabbitMQ (quorum queues, publisher confirms) as "
            f"the broker: single edits p50 {_fmt(x['p50_ms'])} ms, p95 {_fmt(x['p95_ms'])} ms, "
            f"{x['timeouts']} timeouts; burst of {x['burst_edits']:,} edits settled after "
            f"{_fmt(x['burst_1000_s'])} s{against}.", ""]


def cdc_lines(r: dict[str, Any]) -> list[str]:
    x = r.get("cdc")
    if not x:
        return []
    w, c = x["webhook"], x["cdc"]
    return ["## Change capture", "",
            f"A private MariaDB with a row-based binary log, {x['notes']:,} notes. Commit → fresh "
            f"snapshot, one edit after another: webhook p50 {_fmt(w['p50_ms'])} ms, p95 "
            f"{_fmt(w['p95_ms'])} ms; change capture (`graphrag cdc`, no webhook) p50 "
            f"{_fmt(c['p50_ms'])} ms, p95 {_fmt(c['p95_ms'])} ms. Sustained: "
            f"{x['burst_transactions']:,} single-row transactions read and enqueued in "
            f"{_fmt(x['burst_s'])} s ({_fmt(x['transactions_per_s'])} transactions/s; committing "
            f"them took {_fmt(x['commit_s'])} s).", *_notification_lines(x), ""]


def _notification_lines(x: dict[str, Any]) -> list[str]:
    n = x.get("mcp_notification")
    if not n:
        return []
    return ["", f"Commit → MCP `notifications/resources/updated` at a subscribed client (change "
                f"capture, rebuild, publication, the MCP server's re-read): p50 {_fmt(n['p50_ms'])} "
                f"ms, p95 {_fmt(n['p95_ms'])} ms (target: p95 < 1,000 ms), {n['timeouts']} timeouts "
                f"of {n['edits']} edits."]


def full_lines(r: dict[str, Any]) -> list[str]:
    """The full-rebuild path against the paged path (ops.bench.full), both models."""
    runs = {**(r.get("rebuild", {}).get("full") or {})}
    if (r.get("today") or {}).get("full"):
        runs["focus-context"] = r["today"]["full"]
    if not runs:
        return []
    rows = [f"| {s} | {f['notes']:,} ({f['pieces']}) | {_fmt(f['full']['snapshots_per_s'])} | "
            f"{_fmt(f['batched']['snapshots_per_s'])} | {_fmt(f['same_notes']['snapshots_per_s'])} | "
            f"{_fmt(f['speedup'])}× | {_fmt(f.get('speedup_warm'))}× | "
            f"{_fmt(f['rows_per_snapshot'])} "
            f"({_fmt(f['batched'].get('note_rows_per_snapshot'))}) | "
            f"{_fmt(f.get('all_rows_per_snapshot'))} | {_fmt(f['peak_rss_mb'])} |"
            for s, f in runs.items()]
    return ["## Full rebuild by pieces", "",
            "The nightly path (service.full_rebuild: a notebook's notes loaded at once, the workspace "
            "carried on from piece to piece) over its first pieces, against what it replaced (the "
            "batched path over as many consecutive ids from "
            "the middle of the table) and against the batched path over the same notes; note rows: the "
            "rows carrying a note's fields the driver decoded per snapshot written; all rows: every "
            "row (id lists, folders, notebooks too); peak RSS of a fresh process running the "
            "full path over the pieces; warm: the full path once more over the workspace the first "
            "run filled (no SQL, every note costed and rendered already), against paged: what is "
            "left is the strategy's own work and the write, which every path pays, so it is the "
            "most any way of loading could give.", "",
            "| strategy | notes (pieces) | full snapshots/s | paged | same notes | speed-up | warm | "
            "note rows/snapshot (paged) | all rows/snapshot | peak RSS MB |",
            "|---|---|---|---|---|---|---|---|---|---|", *rows, "",
            *_whole_lines(r)]


def _whole_lines(r: dict[str, Any]) -> list[str]:
    """Whole runs of both models (ops.bench.whole): where rows per snapshot are measured."""
    whole = r.get("whole") or {}
    if not whole:
        return []
    rows = [f"| {s} | {f['full']['notes']:,} ({f['full']['pieces']}) | "
            f"{_fmt(f['full']['snapshots_per_s'])} | {_fmt(f['batched']['snapshots_per_s'])} | "
            f"{_fmt(f['speedup'])}× | {_fmt(f['rows_per_snapshot'])} "
            f"({_fmt(f['batched'].get('note_rows_per_snapshot'))}) | "
            f"{_fmt(f.get('all_rows_per_snapshot'))} | {_fmt(f['peak_rss_mb'])} |"
            for s, f in whole["runs"].items()]
    return [f"Whole runs over the {whole['size']:,}-note graphs (every live note; rows per snapshot "
            "are a property of a run: what a piece's foci read of other pieces is carried on to "
            "them): the full path in a fresh process against the batched path over every live id.",
            "", "| strategy | notes (pieces) | full snapshots/s | batched | speed-up | "
            "note rows/snapshot (batched) | all rows/snapshot | peak RSS MB |",
            "|---|---|---|---|---|---|---|---|", *rows, ""]


def today_scale_lines(r: dict[str, Any]) -> list[str]:
    """Today's Doughnut at size (ops.bench.today_scale): the full run only."""
    at_size = r.get("today_scale") or {}
    if not at_size:
        return []
    points = [f"| {p['notes']:,} | {_fmt(p['ms_per_snapshot'])} | {_fmt(p['sql_per_snapshot'])} |"
              for p in at_size["scaling"]]
    nightly = at_size["nightly"]
    runs = [f"| {n} | {x['notes']:,} | {x['snapshots']:,} | {_fmt(x['wall_s'])} | "
            f"{', '.join(map(str, x['peak_rss_mb']))} | {x['wall_s_all_estimated']:,} |"
            for n, x in nightly["by_processes"].items()]
    return ["## Today's Doughnut at size", "",
            "Focus-context cost per snapshot (batched, pages spread over the table, first pass):", "",
            "| notes | ms/snapshot | SQL/snapshot |", "|---|---|---|", *points, "",
            f"The nightly (full path by pieces) on the {nightly['notes']:,}-note graph "
            f"({nightly['live']:,} live), its first pieces, with 1 and 2 fresh worker processes "
            "sharing one queue of pieces; the last column scales the wall time to every live note "
            "(an estimate):", "",
            "| processes | notes | snapshots | wall s | peak RSS MB per process | all notes, s (est.) |",
            "|---|---|---|---|---|---|", *runs, ""]
