"""``python -m ops.bench [--quick]``: the benchmark of issue 5, against real MariaDB and Redis.

One run measures, side by side, on a generated Doughnut-shaped database (``graphrag_bench_<size>``,
reused when its row count matches the generator's, else reloaded with :func:`ops.generate.load`):

- ``rebuild``: snapshots/s of this one process through ``rebuild_notes`` (batches of 100) over pages
  of 100 consecutive live ids spread over the table (what the nightly rebuild pages through), and SQL
  statements per snapshot (a ``before_cursor_execute`` listener), next to a *baseline* running the
  same algorithm one note and one relation at a time (``NoteStore(in_chunk=1)``, one focus per
  batch: the lazy-ORM pattern); per strategy (wavefront, layered);
- ``memory``: Redis ``MEMORY USAGE`` per snapshot and the reverse index's share;
- ``reader``: ``SnapshotReader.get`` hits (µs) next to a raw redis-py GET + ``orjson.loads`` of the
  same keys, interleaved in blocks; HTTP hits against ``graphrag serve`` at a fixed request rate;
- ``live``: single ``ContextService.compute`` calls for random live notes, per strategy;
- ``invalidation``: a real Celery worker subprocess and ``graphrag serve``; signed webhook to a
  snapshot showing the new title, for single edits and for a burst of 1,000 edits over 200 notes;
- ``scaling`` (full run): ms per snapshot at 10k, 100k and 1M notes;
- ``profile``: the wavefront rebuild once more under cProfile.

Results: ``<out>/latest.json``, ``latest.md`` and PNG plots (:mod:`ops.bench_report`). Every Redis
key created lives under ``graphrag-bench:<run>`` and is deleted at the end; Celery gets a Redis
database of its own (the first empty one of 15..8), flushed at the end. Edited titles are restored.
Progress goes to stderr. Timings are never pass/fail tests: the report compares them to the targets.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import cProfile
import datetime as dt
import math
import os
import platform
import pstats
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson
import redis
from sqlalchemy import bindparam, create_engine, desc, event, func, select, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError
from standardwebhooks.webhooks import Webhook

from graphrag import GraphRagError, Request
from ops.bench_report import write_report
from ops.generate import load
from storage.context import ContextService, open_engine
from storage.keys import Keys
from storage.rebuild import RebuildReport, rebuild
from storage.sql import NoteStore, note
from worker.compose import build_reader, build_service, build_snapshot_store, rebuild_notes, wall_ms
from worker.settings import Settings, load_settings

__all__ = ["FULL", "QUICK", "Plan", "main"]

ROOT = Path(__file__).resolve().parents[1]
STRATEGIES = ("wavefront", "layered")
MAX_TOKEN_LIMIT = 5000
EDIT_MARK = "bench-edit"
BROKER_DBS = range(15, 7, -1)
CLAIM_KEY = "graphrag-bench:broker-claim"
PAGE = 100
WARMUP_EDITS = 4


class BenchError(Exception):
    """The benchmark cannot go on (a service missing, a subprocess that did not start, ...)."""


@dataclass(frozen=True)
class Plan:
    """How much of everything one run measures."""

    main_size: int = 100_000
    scaling_sizes: tuple[int, ...] = ()
    rebuild_notes: int = 2_000
    baseline_notes: int = 100
    reads: int = 20_000
    http_rate: int = 300
    http_seconds: float = 5.0
    live_notes: int = 200
    profile_notes: int = 500
    edits: int = 30
    edit_timeout_s: float = 15.0
    burst_notes: int = 200
    burst_edits: int = 1_000
    burst_timeout_s: float = 60.0
    scaling_notes: int = 2_000


QUICK = Plan()
FULL = Plan(scaling_sizes=(10_000, 100_000, 1_000_000), rebuild_notes=5_000, baseline_notes=300,
            reads=50_000, http_seconds=10.0, live_notes=500, profile_notes=2_000, edits=60,
            burst_timeout_s=300.0)

_STARTED = time.perf_counter()


def say(text: str) -> None:
    print(f"[bench {time.perf_counter() - _STARTED:6.1f}s] {text}", file=sys.stderr, flush=True)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` in 0..1); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


def ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def wait_for(check: Callable[[], bool], timeout_s: float, interval_s: float = 0.005) -> bool:
    deadline = time.perf_counter() + timeout_s
    while not check():
        if time.perf_counter() > deadline:
            return False
        time.sleep(interval_s)
    return True


def statement_kind(statement: str) -> str:
    """A short name of a statement: ``SELECT WHERE note.parent_id``, ``SELECT rows WHERE n.id``, ..."""
    flat = " ".join(statement.split())
    if flat.startswith("WITH RECURSIVE"):
        return "WITH RECURSIVE (ancestors)"
    where = re.search(r" WHERE (\S+)", flat)
    joined = "rows " if " JOIN " in flat else ""
    return f"{flat.split(' ', 1)[0]} {joined}WHERE {where.group(1) if where else '-'}"


class SqlCounter:
    """Counts and times the statements an engine executes (``before/after_cursor_execute``);
    the benchmark drives one connection at a time."""

    def __init__(self, engine: Engine) -> None:
        self.count, self.seconds, self._started = 0, 0.0, 0.0
        self.by_kind: dict[str, list[float]] = {}
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, *_: Any) -> None:
        self.count += 1
        self._started = time.perf_counter()

    def _after(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        spent = time.perf_counter() - self._started
        self.seconds += spent
        entry = self.by_kind.setdefault(statement_kind(statement), [0, 0.0])
        entry[0], entry[1] = entry[0] + 1, entry[1] + spent

    def mark(self) -> tuple[int, float, dict[str, tuple[int, float]]]:
        return self.count, self.seconds, {k: (int(n), t) for k, (n, t) in self.by_kind.items()}

    def since(self, mark: tuple[int, float, dict[str, tuple[int, float]]]) -> dict[str, Any]:
        count, seconds, kinds = mark
        by_kind = {k: {"statements": int(n) - kinds.get(k, (0, 0.0))[0],
                       "seconds": t - kinds.get(k, (0, 0.0))[1]} for k, (n, t) in self.by_kind.items()}
        return {"statements": self.count - count, "seconds": self.seconds - seconds,
                "by_kind": {k: v for k, v in by_kind.items() if v["statements"]}}


@dataclass
class Bench:
    """One run: options, its Redis client and key prefix, samples for the plots, edited titles."""

    plan: Plan
    mysql_url: str
    redis_url: str
    client: redis.Redis
    seed: int = 0
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    samples: dict[str, list[float]] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"graphrag-bench:{self.run}"

    def db_url(self, size: int) -> str:
        url = make_url(self.mysql_url).set(database=f"graphrag_bench_{size_name(size)}")
        return url.render_as_string(hide_password=False)

    def settings(self, size: int, name: str, strategy: str = "wavefront") -> Settings:
        return load_settings(database_url=self.db_url(size), redis_url=self.redis_url,
                             redis_prefix=f"{self.base}:{name}", strategies=strategy,
                             max_token_limit=MAX_TOKEN_LIMIT)


@dataclass
class Graph:
    """One loaded database: its service (tiktoken), SQL counter and live ids in id order."""

    size: int
    url: str
    service: ContextService
    sql: SqlCounter
    ids: list[int]
    originals: dict[int, str] = field(default_factory=dict)

    @property
    def engine(self) -> Engine:
        return self.service.store.engine


def size_name(size: int) -> str:
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}m"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


# -- databases ------------------------------------------------------------------------------------
def _matches(url: str, size: int) -> bool:
    """The database holds exactly the generator's ``size`` rows and no leftover bench edits."""
    engine = open_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(func.count()).select_from(note)).scalar_one()
            edited = conn.execute(select(func.count()).select_from(note).where(
                note.c.topic_constructor.like(f"{EDIT_MARK}%"))).scalar_one()
        return int(rows) == size and int(edited) == 0
    except SQLAlchemyError:
        return False
    finally:
        engine.dispose()


def ensure_database(bench: Bench, size: int) -> str:
    url = bench.db_url(size)
    name = make_url(url).database
    if _matches(url, size):
        say(f"reusing {name} ({size:,} notes)")
        return url
    say(f"loading {name}: {size:,} notes, seed {bench.seed} ...")
    admin = create_engine(make_url(bench.mysql_url).set(database=None))
    try:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
            conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 "
                              "COLLATE utf8mb4_unicode_ci"))
    finally:
        admin.dispose()
    engine = open_engine(url)
    try:
        counts = load(engine, size, bench.seed)
    finally:
        engine.dispose()
    say(f"loaded {name} in {counts['seconds']:.0f} s")
    return url


def open_graph(bench: Bench, size: int) -> Graph:
    url = ensure_database(bench, size)
    service = build_service(bench.settings(size, "main"))
    ids = service.store.live_ids_after(0, size + 1)
    return Graph(size, url, service, SqlCounter(service.store.engine), ids)


def _max_group(conn: Connection, column: Any) -> int:
    stmt = (select(func.count().label("n")).where(column.is_not(None), note.c.deleted_at.is_(None))
            .group_by(column).order_by(desc("n")).limit(1))
    return int(conn.execute(stmt).scalar() or 0)


def graph_counts(graph: Graph) -> dict[str, Any]:
    cols = (func.count(), func.count(note.c.target_note_id), func.count(note.c.deleted_at),
            func.count(func.distinct(note.c.notebook_id)))
    with graph.engine.connect() as conn:
        total, links, deleted, notebooks = conn.execute(select(*cols)).one()
        children, inbound = _max_group(conn, note.c.parent_id), _max_group(conn, note.c.target_note_id)
    return {"database": make_url(graph.url).database, "table_mb": round(table_mb(graph), 1),
            "notes": int(total), "live": len(graph.ids),
            "links": int(links), "deleted": int(deleted), "notebooks": int(notebooks),
            "max_children": children, "max_inbound": inbound}


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine_info(bench: Bench, graph: Graph) -> dict[str, Any]:
    with graph.engine.connect() as conn:
        mariadb, pool = conn.execute(text("SELECT VERSION(), @@innodb_buffer_pool_size")).one()
    info: Any = bench.client.info("server")
    return {"cores": os.cpu_count(), "cpu": _cpu_model(), "python": platform.python_version(),
            "platform": platform.platform(), "mariadb": str(mariadb), "redis": info["redis_version"],
            "innodb_buffer_pool_mb": int(pool) // 2**20,
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def table_mb(graph: Graph) -> float:
    """Data + index size of ``note`` as information_schema estimates it."""
    stmt = text("SELECT data_length + index_length FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = 'note'")
    with graph.engine.connect() as conn:
        return int(conn.execute(stmt).scalar() or 0) / 2**20


# -- rebuild ----------------------------------------------------------------------------------------
def pages(ids: Sequence[int], notes: int) -> list[int]:
    """``notes`` ids as pages of 100 consecutive live ids, spread evenly over the table."""
    count = max(1, math.ceil(notes / PAGE))
    step = max(PAGE, (len(ids) - PAGE) // count)
    picked = [i for k in range(count) for i in ids[k * step : k * step + PAGE]]
    return list(dict.fromkeys(picked))[:notes]


def _figures(report: RebuildReport, sql: dict[str, Any], notes: int) -> dict[str, Any]:
    if report.errors:
        say(f"  {len(report.errors)} errors, e.g. {next(iter(report.errors.items()))}")
    return {"notes": notes, "snapshots": report.count, "seconds": round(report.seconds, 3),
            "snapshots_per_s": ratio(report.count, report.seconds),
            "ms_per_snapshot": ratio(report.seconds * 1000, report.count),
            "sql_statements": sql["statements"],
            "sql_per_snapshot": ratio(sql["statements"], report.count),
            "sql_seconds": sql["seconds"], "sql_share": ratio(sql["seconds"], report.seconds),
            "sql_by_kind": sql["by_kind"], "errors": len(report.errors)}


def timed_rebuild(bench: Bench, graph: Graph, ids: Sequence[int], strategy: str,
                  name: str) -> dict[str, Any]:
    """``rebuild_notes`` (batches of 100) of ``ids`` under the key prefix ``<base>:<name>``."""
    settings = bench.settings(graph.size, name, strategy)
    store = build_snapshot_store(settings, bench.client)
    mark = graph.sql.mark()
    report = rebuild_notes(settings, graph.service, store, ids)
    return _figures(report, graph.sql.since(mark), len(ids))


def baseline_rebuild(bench: Bench, graph: Graph, ids: Sequence[int], strategy: str) -> dict[str, Any]:
    """The same algorithm and writes, one focus per batch and one id per ``IN``: the lazy walk."""
    settings = bench.settings(graph.size, f"baseline-{strategy}", strategy)
    store = build_snapshot_store(settings, bench.client)
    lazy = ContextService(NoteStore(graph.engine, in_chunk=1), graph.service.counter,
                          graph.service.params)
    mark = graph.sql.mark()
    report = rebuild(lazy, store, ids, strategies=settings.strategies, seeds=settings.seeds,
                     max_token_limit=settings.max_token_limit,
                     layered_limits=settings.layered_limits, now_ms=wall_ms(), batch_size=1,
                     epoch_size=1)
    return _figures(report, graph.sql.since(mark), len(ids))


def _compare(batched: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    return {"batched": batched, "baseline": baseline,
            "sql_ratio": ratio(baseline["sql_per_snapshot"], batched["sql_per_snapshot"]),
            "throughput_ratio": ratio(batched["snapshots_per_s"], baseline["snapshots_per_s"])}


def rebuild_section(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    by: dict[str, Any] = {}
    for strategy in STRATEGIES:
        timed_rebuild(bench, graph, foci[:PAGE], strategy, f"warmup-{strategy}")
        batched = timed_rebuild(bench, graph, foci, strategy,
                                "main" if strategy == "wavefront" else strategy)
        say(f"rebuild {strategy}: {batched['snapshots_per_s']:.0f} snapshots/s, "
            f"{batched['sql_per_snapshot']:.3f} SQL/snapshot over {len(foci)} notes")
        lazy = baseline_rebuild(bench, graph, foci[: bench.plan.baseline_notes], strategy)
        say(f"baseline {strategy}: {lazy['snapshots_per_s']:.1f} snapshots/s, "
            f"{lazy['sql_per_snapshot']:.1f} SQL/snapshot over {lazy['notes']} notes")
        by[strategy] = _compare(batched, lazy)
    main = by["wavefront"]
    return {"snapshots_per_s": main["batched"]["snapshots_per_s"],
            "sql_per_snapshot": main["batched"]["sql_per_snapshot"],
            "baseline_snapshots_per_s": main["baseline"]["snapshots_per_s"],
            "baseline_sql_per_snapshot": main["baseline"]["sql_per_snapshot"],
            "sql_ratio": main["sql_ratio"], "throughput_ratio": main["throughput_ratio"],
            "notes": len(foci), "baseline_notes": main["baseline"]["notes"], "batch_size": PAGE,
            "by_strategy": by}


# -- memory -----------------------------------------------------------------------------------------
def key_memory(client: redis.Redis, prefix: str) -> dict[str, list[int]]:
    """Kind (snap, dep, shows, gen, ...) -> [keys, bytes] under ``prefix`` (MEMORY USAGE SAMPLES 0)."""
    totals: dict[str, list[int]] = {}
    batch: list[bytes] = []
    keys: Iterator[bytes] = client.scan_iter(match=f"{prefix}:*", count=1000)
    for key in [*keys, None]:
        if key is not None:
            batch.append(key)
        if batch and (key is None or len(batch) == 1000):
            pipe = client.pipeline(transaction=False)
            for k in batch:
                pipe.execute_command("MEMORY", "USAGE", k, "SAMPLES", "0")  # type: ignore[no-untyped-call]
            for k, size in zip(batch, pipe.execute(), strict=True):
                kind = k[len(prefix) + 1 :].split(b":", 1)[0].decode()
                entry = totals.setdefault(kind, [0, 0])
                entry[0], entry[1] = entry[0] + 1, entry[1] + int(size or 0)
            batch = []
    return totals


def memory_section(bench: Bench) -> dict[str, Any]:
    main = key_memory(bench.client, f"{bench.base}:main")
    kinds = {k: main.get(k, [0, 0]) for k in ("snap", "dep", "shows", "gen")}
    total = sum(b for _, b in kinds.values())
    layered = key_memory(bench.client, f"{bench.base}:layered").get("snap", [0, 0])
    return {"bytes_per_snapshot": ratio(kinds["snap"][1], kinds["snap"][0]),
            "dep_index_share": ratio(kinds["dep"][1], total), "snapshots": kinds["snap"][0],
            "all_bytes_per_snapshot": ratio(total, kinds["snap"][0]),
            "by_kind": {k: {"keys": n, "bytes": b} for k, (n, b) in kinds.items()},
            "by_strategy": {"wavefront": ratio(kinds["snap"][1], kinds["snap"][0]),
                            "layered": ratio(layered[1], layered[0])}}


# -- reader -----------------------------------------------------------------------------------------
def _time_reader(get: Callable[[int], Any], foci: Sequence[int]) -> list[float]:
    clock, out = time.perf_counter_ns, []
    for focus in foci:
        started = clock()
        served = get(focus)
        out.append((clock() - started) / 1000)
        if served.source != "cache":
            raise BenchError(f"note {focus} was served from {served.source}, not from the cache")
    return out


def _time_raw(client: redis.Redis, keys: Sequence[str]) -> list[float]:
    clock, loads, out = time.perf_counter_ns, orjson.loads, []
    for key in keys:
        started = clock()
        loads(client.get(key))  # type: ignore[arg-type]
        out.append((clock() - started) / 1000)
    return out


def reader_section(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    """Reader hits and raw GET + decode of the same keys, alternating blocks of ``len(foci)``."""
    settings = bench.settings(graph.size, "main")
    store = build_snapshot_store(settings, bench.client)
    reader = build_reader(settings, graph.service, store)
    rng, hits, raws = random.Random(bench.seed + 2), [], []
    order = list(foci)
    for _ in range(math.ceil(bench.plan.reads / len(foci))):
        rng.shuffle(order)
        hits += _time_reader(reader.get, order)
        raws += _time_raw(bench.client, [store.keys.snapshot(f, "wavefront", 0) for f in order])
    bench.samples.update(hit_us=hits, raw_us=raws)
    say(f"reader: hit p50 {percentile(hits, .5):.0f} µs, raw GET p50 {percentile(raws, .5):.0f} µs")
    return {"hit_p50_us": percentile(hits, .5), "hit_p99_us": percentile(hits, .99),
            "raw_get_p50_us": percentile(raws, .5), "raw_get_p99_us": percentile(raws, .99),
            "ratio_p50": ratio(percentile(hits, .5), percentile(raws, .5)), "reads": len(hits),
            "snapshots": len(foci)}


# -- live -------------------------------------------------------------------------------------------
def _time_live(service: ContextService, focus: int, strategy: str) -> float:
    request = Request(focus, 0, MAX_TOKEN_LIMIT, wall_ms(), traversal_token_limit=MAX_TOKEN_LIMIT)
    started = time.perf_counter()
    service.compute(request, strategy)
    return (time.perf_counter() - started) * 1000


def live_section(bench: Bench, graph: Graph) -> dict[str, Any]:
    foci = random.Random(bench.seed + 1).sample(graph.ids, min(bench.plan.live_notes, len(graph.ids)))
    by: dict[str, Any] = {}
    for strategy in STRATEGIES:
        ms = [_time_live(graph.service, f, strategy) for f in foci]
        bench.samples[f"live_{strategy}_ms"] = ms
        by[strategy] = {"p50_ms": percentile(ms, .5), "p95_ms": percentile(ms, .95),
                        "p99_ms": percentile(ms, .99), "mean_ms": sum(ms) / len(ms)}
        say(f"live {strategy}: p50 {by[strategy]['p50_ms']:.1f} ms, p95 {by[strategy]['p95_ms']:.1f} ms")
    return {"p50_ms": by["wavefront"]["p50_ms"], "p95_ms": by["wavefront"]["p95_ms"],
            "notes": len(foci), "by_strategy": by}


# -- profile ----------------------------------------------------------------------------------------
def _label(func: tuple[str, int, str]) -> str:
    filename, line, name = func
    if filename == "~":
        return name
    if "site-packages/" in filename:
        path = filename.split("site-packages/", 1)[1]
    else:
        path = filename.removeprefix(f"{ROOT}/")
    return f"{path}:{line}({name})"


def top_functions(stats: pstats.Stats, key: str, count: int) -> list[dict[str, Any]]:
    stats.sort_stats(key)
    rows: list[dict[str, Any]] = []
    for where in stats.fcn_list:  # type: ignore[attr-defined]
        _, calls, own, cumulative, _ = stats.stats[where]  # type: ignore[attr-defined]
        name = _label(where)
        if name.startswith("ops/bench") or "_lsprof.Profiler" in name:
            continue
        rows.append({"function": name, "calls": calls, "own_s": round(own, 4),
                     "cumulative_s": round(cumulative, 4)})
        if len(rows) == count:
            break
    return rows


def profile_section(bench: Bench, graph: Graph, foci: list[int]) -> dict[str, Any]:
    ids = foci[: bench.plan.profile_notes]
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        figures = timed_rebuild(bench, graph, ids, "wavefront", "profile")
    finally:
        profiler.disable()
    stats = pstats.Stats(profiler)
    say(f"profiled a wavefront rebuild of {len(ids)} notes ({figures['seconds']:.1f} s under cProfile)")
    return {"strategy": "wavefront", "notes": len(ids), "seconds": figures["seconds"],
            "cumulative": top_functions(stats, "cumulative", 15),
            "own": top_functions(stats, "tottime", 10)}


# -- services: a real Celery worker and `graphrag serve` ---------------------------------------------
@dataclass
class Services:
    base_url: str
    token: str
    secret: str
    broker: redis.Redis
    prefix: str


def with_db(url: str, db: int) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}"))


@contextlib.contextmanager
def claimed_broker(redis_url: str) -> Iterator[tuple[str, redis.Redis]]:
    """The first empty Redis database of 15..8, claimed with a marker key; flushed afterwards."""
    token = uuid.uuid4().hex
    for db in BROKER_DBS:
        url = with_db(redis_url, db)
        client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
        if client.set(CLAIM_KEY, token, nx=True, ex=3600) and client.dbsize() == 1:
            break
        if client.get(CLAIM_KEY) == token.encode():
            client.delete(CLAIM_KEY)
        client.close()
    else:
        raise BenchError(f"no empty Redis database among {list(BROKER_DBS)} for the Celery broker")
    try:
        yield url, client
    finally:
        if client.get(CLAIM_KEY) == token.encode():
            client.flushdb()
        client.close()


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group this run started, then SIGKILL whatever is left."""
    for sig, wait_s in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait_s)
        if wait_for(lambda: not _group_alive(proc.pid), wait_s, 0.05):
            return


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def process_group(command: list[str], env: dict[str, str], log: Path,
                  ready: Callable[[], bool], what: str) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("ab") as out:
        proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        if not wait_for(lambda: ready() or proc.poll() is not None, 60, 0.1) or proc.poll() is not None:
            raise BenchError(f"{what} did not start:\n{_tail(log)}")
        yield proc
    finally:
        stop_group(proc)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _healthy(base_url: str) -> bool:
    try:
        return httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def service_env(bench: Bench, graph: Graph, broker_url: str, token: str, secret: str) -> dict[str, str]:
    keep = {"GRAPHRAG_TIKTOKEN_FILE"}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GRAPHRAG_", "CELERY_")) or k in keep}
    env.update(GRAPHRAG_DATABASE_URL=graph.url, GRAPHRAG_REDIS_URL=bench.redis_url,
               GRAPHRAG_REDIS_PREFIX=f"{bench.base}:main", CELERY_BROKER_URL=broker_url,
               GRAPHRAG_READER_TOKEN=token, GRAPHRAG_WEBHOOK_SECRET=secret,
               GRAPHRAG_STRATEGIES="wavefront", GRAPHRAG_MAX_TOKEN_LIMIT=str(MAX_TOKEN_LIMIT),
               PYTHONUNBUFFERED="1")
    return env


def _serve_command(port: int) -> list[str]:
    script = Path(sys.executable).with_name("graphrag")
    head = [str(script)] if script.exists() else [sys.executable, "-c",
                                                   "from worker.cli import main; main()"]
    return [*head, "serve", "--host", "127.0.0.1", "--port", str(port)]


@contextlib.contextmanager
def services(bench: Bench, graph: Graph) -> Iterator[Services]:
    token, secret = f"bench-{uuid.uuid4().hex}", "whsec_" + base64.b64encode(os.urandom(24)).decode()
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    worker = [sys.executable, "-m", "celery", "-A", "worker.app", "worker", "-Q", "realtime,bulk",
              "--concurrency", "2", "--loglevel=info", "--without-gossip", "--without-mingle",
              "--without-heartbeat", "-n", f"bench-{bench.run}@%h"]
    with claimed_broker(bench.redis_url) as (broker_url, broker), \
            tempfile.TemporaryDirectory(prefix="graphrag-bench-") as tmp:
        env = service_env(bench, graph, broker_url, token, secret)
        log = Path(tmp) / "worker.log"
        with process_group(worker, env, log, lambda: bool(re.search(r"\bready\.", log.read_text())),
                           "the Celery worker"), \
                process_group(_serve_command(port), env, Path(tmp) / "serve.log",
                              lambda: _healthy(base_url), "graphrag serve"):
            say(f"Celery worker (2 processes) and graphrag serve on port {port} are up")
            yield Services(base_url, token, secret, broker, f"{bench.base}:main")


# -- HTTP reader --------------------------------------------------------------------------------------
def http_section(bench: Bench, svc: Services, foci: list[int]) -> dict[str, Any]:
    """GET hits at a fixed rate on one keep-alive connection; latency from send to full body."""
    plan, rng = bench.plan, random.Random(bench.seed + 3)
    targets = [rng.choice(foci) for _ in range(int(plan.http_rate * plan.http_seconds))]
    latencies, late, wrong = [], 0, 0
    with httpx.Client(base_url=svc.base_url, headers={"Authorization": f"Bearer {svc.token}"}) as http:
        for focus in targets[:50]:
            http.get(f"/notes/{focus}/graph")
        start = time.perf_counter() + 0.05
        for i, focus in enumerate(targets):
            due = start + i / plan.http_rate
            time.sleep(max(0.0, due - time.perf_counter()))
            sent = time.perf_counter()
            reply = http.get(f"/notes/{focus}/graph")
            latencies.append((time.perf_counter() - sent) * 1e6)
            late += sent - due > 0.001
            wrong += reply.status_code != 200 or reply.headers.get("x-graphrag-source") != "cache"
        achieved = len(targets) / (time.perf_counter() - start)
    bench.samples["http_us"] = latencies
    say(f"HTTP: p50 {percentile(latencies, .5):.0f} µs, p99 {percentile(latencies, .99):.0f} µs "
        f"at {achieved:.0f} req/s")
    return {"http_hit_p50_us": percentile(latencies, .5), "http_hit_p99_us": percentile(latencies, .99),
            "http_rate_per_s": plan.http_rate, "http_achieved_per_s": achieved,
            "http_requests": len(targets), "http_late": late, "http_not_cache_hits": wrong}


# -- invalidation -------------------------------------------------------------------------------------
def set_titles(graph: Graph, titles: dict[int, str]) -> None:
    """UPDATE the titles, remembering the originals first (restored by :func:`restore_titles`)."""
    new = [i for i in titles if i not in graph.originals]
    with graph.engine.begin() as conn:
        if new:
            rows = conn.execute(select(note.c.id, note.c.topic_constructor).where(note.c.id.in_(new)))
            graph.originals.update({r.id: r.topic_constructor for r in rows})
        stmt = note.update().where(note.c.id == bindparam("nid")).values(
            topic_constructor=bindparam("title"))
        conn.execute(stmt, [{"nid": i, "title": t} for i, t in titles.items()])


def restore_titles(graph: Graph) -> None:
    if graph.originals:
        set_titles(graph, dict(graph.originals))
        say(f"restored the titles of {len(graph.originals)} edited notes")
        graph.originals.clear()


def post_events(http: httpx.Client, secret: str, note_ids: Sequence[int]) -> None:
    now = dt.datetime.now(dt.UTC)
    events = [{"type": "note.updated", "noteId": i, "occurredAt": now.isoformat()} for i in note_ids]
    body = orjson.dumps({"events": events})
    msg_id = f"msg_{uuid.uuid4().hex}"
    headers = {"webhook-id": msg_id, "webhook-timestamp": str(int(now.timestamp())),
               "webhook-signature": Webhook(secret).sign(msg_id, now, body.decode()),
               "content-type": "application/json"}
    reply = http.post("/webhooks/note-events", content=body, headers=headers)
    if reply.status_code != 202:
        raise BenchError(f"webhook answered {reply.status_code}: {reply.text[:200]}")


def _mget(client: redis.Redis, keys: list[str]) -> list[bytes | None]:
    return list(client.mget(keys))  # type: ignore[arg-type]


def _shown_related(raw: bytes | None) -> list[int]:
    if raw is None:
        return []
    related = orjson.loads(raw)["result"]["relatedNotes"]
    return [int(r["uri"].removeprefix("/n")) for r in related[:3]]


def edit_pairs(bench: Bench, graph: Graph, foci: list[int], count: int) -> list[tuple[int, int]]:
    """(note to edit, focus to watch): a non-link note among the first related notes of a
    rebuilt focus (its parent, child, ...); the change reaches that focus through ``dep:``."""
    keys = Keys(f"{bench.base}:main")
    raws = _mget(bench.client, [keys.snapshot(f, "wavefront", 0) for f in foci])
    plain = _plain_notes(graph, foci)
    rng, pairs, used = random.Random(bench.seed + 4), [], set()
    for focus, raw in rng.sample(list(zip(foci, raws, strict=True)), len(foci)):
        shown = [n for n in _shown_related(raw) if n in plain and n not in used]
        if shown and focus not in used:
            pairs.append((shown[0], focus))
            used |= {shown[0], focus}
        if len(pairs) == count:
            break
    return pairs


def _plain_notes(graph: Graph, ids: Sequence[int]) -> set[int]:
    stmt = select(note.c.id).where(note.c.id.in_(bindparam("ids", expanding=True)),
                                   note.c.target_note_id.is_(None), note.c.deleted_at.is_(None))
    with graph.engine.connect() as conn:
        return set(conn.execute(stmt, {"ids": list(ids)}).scalars())


def broker_idle(svc: Services, dirty_key: str, client: redis.Redis) -> bool:
    queued = sum(int(svc.broker.llen(k)) for q in (b"realtime*", b"bulk*")
                 for k in svc.broker.scan_iter(match=q))
    return queued == 0 and int(svc.broker.hlen("unacked")) == 0 and int(client.zcard(dirty_key)) == 0


def _shows(client: redis.Redis, key: str, marker: bytes) -> Callable[[], bool]:
    return lambda: marker in (client.get(key) or b"")


def edit_latencies(bench: Bench, graph: Graph, svc: Services, pairs: Sequence[tuple[int, int]],
                   http: httpx.Client, tag: str) -> tuple[list[float], int]:
    """(ms from webhook to a snapshot showing the new title, timeouts), one edit after another."""
    keys, latencies, timeouts = Keys(svc.prefix), [], 0
    for i, (edited, watch) in enumerate(pairs):
        title = f"{EDIT_MARK} {bench.run} {tag}{i}"
        set_titles(graph, {edited: title})
        shows = _shows(bench.client, keys.snapshot(watch, "wavefront", 0), title.encode())
        started = time.perf_counter()
        post_events(http, svc.secret, [edited])
        if wait_for(shows, bench.plan.edit_timeout_s):
            latencies.append((time.perf_counter() - started) * 1000)
        else:
            timeouts += 1
    return latencies, timeouts


def single_edits(bench: Bench, graph: Graph, svc: Services, pairs: list[tuple[int, int]],
                 http: httpx.Client) -> dict[str, Any]:
    """The first ``WARMUP_EDITS`` (worker processes building their runtime) are reported apart."""
    cold, _ = edit_latencies(bench, graph, svc, pairs[:WARMUP_EDITS], http, "w")
    latencies, timeouts = edit_latencies(bench, graph, svc, pairs[WARMUP_EDITS:], http, "s")
    bench.samples["invalidation_ms"] = latencies
    say(f"single edits: p50 {percentile(latencies, .5):.0f} ms, p95 {percentile(latencies, .95):.0f} "
        f"ms, {timeouts} timeouts of {len(latencies) + timeouts} (warm-up: {_rounded(cold)} ms)")
    return {"p50_ms": percentile(latencies, .5), "p95_ms": percentile(latencies, .95),
            "max_ms": max(latencies, default=math.nan), "edits": len(latencies) + timeouts,
            "timeouts": timeouts, "samples_ms": _rounded(latencies), "warmup_ms": _rounded(cold)}


def _rounded(values: Sequence[float]) -> list[float]:
    return [round(v, 1) for v in values]


def burst(bench: Bench, graph: Graph, svc: Services, notes: list[int],
          http: httpx.Client) -> dict[str, Any]:
    """``burst_edits`` title edits over ``notes``, one webhook per round of edits; the time from the
    first edit until the dirty set and the broker are empty and a sample of the notes' snapshots show
    the last titles."""
    rounds = math.ceil(bench.plan.burst_edits / len(notes))
    keys, dirty = Keys(svc.prefix), Keys(svc.prefix).dirty()
    started = time.perf_counter()
    for r in range(rounds):
        titles = {n: f"{EDIT_MARK} {bench.run} b{r} {n}" for n in notes}
        set_titles(graph, titles)
        post_events(http, svc.secret, notes)
    sample = random.Random(bench.seed + 5).sample(notes, min(20, len(notes)))
    wanted = [(keys.snapshot(n, "wavefront", 0), titles[n].encode()) for n in sample]
    peak = [0]

    def settled() -> bool:
        peak[0] = max(peak[0], int(bench.client.zcard(dirty)))
        raws = _mget(bench.client, [k for k, _ in wanted])
        shown = all(t in (raw or b"") for raw, (_, t) in zip(raws, wanted, strict=True))
        return shown and broker_idle(svc, dirty, bench.client)

    ok = wait_for(settled, bench.plan.burst_timeout_s, 0.05)
    seconds = time.perf_counter() - started
    say(f"burst of {rounds * len(notes)} edits over {len(notes)} notes: "
        f"{'settled' if ok else 'NOT settled'} after {seconds:.1f} s (dirty peak {peak[0]})")
    return {"burst_1000_s": seconds if ok else math.nan, "burst_settled": ok,
            "burst_edits": rounds * len(notes), "burst_notes": len(notes), "burst_webhooks": rounds,
            "burst_dirty_peak": peak[0], "burst_timeout_s": bench.plan.burst_timeout_s}


def services_section(bench: Bench, graph: Graph,
                     foci: list[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(HTTP reader figures, invalidation figures), with one worker and one HTTP server."""
    pairs = edit_pairs(bench, graph, foci, WARMUP_EDITS + bench.plan.edits)
    used = {n for pair in pairs for n in pair}
    plain = sorted(_plain_notes(graph, foci) - used)
    notes = random.Random(bench.seed + 6).sample(plain, min(bench.plan.burst_notes, len(plain)))
    with services(bench, graph) as svc, httpx.Client(base_url=svc.base_url, timeout=10) as http:
        reading = http_section(bench, svc, foci)
        single = single_edits(bench, graph, svc, pairs, http)
        dirty = Keys(svc.prefix).dirty()
        wait_for(lambda: broker_idle(svc, dirty, bench.client), 60, 0.05)
        return reading, {**single, **burst(bench, graph, svc, notes, http)}


# -- scaling ------------------------------------------------------------------------------------------
def scaling_point(bench: Bench, graph: Graph) -> dict[str, Any]:
    """A first pass (what a nightly rebuild meets) and a second pass over the same ids (warm caches)."""
    ids, size = pages(graph.ids, bench.plan.scaling_notes), graph.size
    timed_rebuild(bench, graph, ids[:PAGE], "wavefront", f"warmup-scale-{size}")
    first = timed_rebuild(bench, graph, ids, "wavefront", f"scale-{size}")
    second = timed_rebuild(bench, graph, ids, "wavefront", f"scale-{size}-again")
    say(f"scaling {size:,} notes: {first['ms_per_snapshot']:.2f} ms/snapshot "
        f"(second pass {second['ms_per_snapshot']:.2f}), SQL {first['sql_share']:.0%} of the time")
    return {"notes": size, "ms_per_snapshot": first["ms_per_snapshot"],
            "second_pass_ms_per_snapshot": second["ms_per_snapshot"],
            "sql_per_snapshot": first["sql_per_snapshot"], "sql_share": first["sql_share"],
            "sql_by_kind": first["sql_by_kind"], "snapshots": first["snapshots"],
            "table_mb": round(table_mb(graph), 1)}


def scaling_section(bench: Bench, main: Graph, main_rebuild: dict[str, Any]) -> list[dict[str, Any]]:
    """ms per snapshot (wavefront, batches of 100) at each size; the quick run reports its one size."""
    if not bench.plan.scaling_sizes:
        return [{"notes": main.size, "ms_per_snapshot": main_rebuild["ms_per_snapshot"],
                 "sql_per_snapshot": main_rebuild["sql_per_snapshot"],
                 "sql_share": main_rebuild["sql_share"], "table_mb": round(table_mb(main), 1)}]
    points = []
    for size in bench.plan.scaling_sizes:
        graph = main if size == main.size else open_graph(bench, size)
        try:
            points.append(scaling_point(bench, graph))
        finally:
            if graph is not main:
                graph.engine.dispose()
    return points


# -- the run ------------------------------------------------------------------------------------------
def delete_keys(client: redis.Redis, prefix: str) -> None:
    removed = 0
    for chunk in _chunked(client.scan_iter(match=f"{prefix}:*", count=1000), 1000):
        removed += int(client.unlink(*chunk))
    say(f"deleted {removed} Redis keys under {prefix}")


def _chunked(items: Iterator[bytes], size: int) -> Iterator[list[bytes]]:
    chunk: list[bytes] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def measure(bench: Bench, graph: Graph) -> dict[str, Any]:
    foci = pages(graph.ids, bench.plan.rebuild_notes)
    results: dict[str, Any] = {"machine": machine_info(bench, graph), "graph": graph_counts(graph)}
    say(f"graph: {results['graph']}")
    results["rebuild"] = rebuild_section(bench, graph, foci)
    results["memory"] = memory_section(bench)
    results["reader"] = reader_section(bench, graph, foci)
    results["live"] = live_section(bench, graph)
    results["live"]["speedup_hit_vs_live"] = ratio(results["live"]["p50_ms"] * 1000,
                                                   results["reader"]["hit_p50_us"])
    results["profile"] = profile_section(bench, graph, foci)
    try:
        reading, results["invalidation"] = services_section(bench, graph, foci)
    finally:
        restore_titles(graph)
    results["reader"].update(reading)
    results["scaling"] = scaling_section(bench, graph, results["rebuild"]["by_strategy"]["wavefront"]
                                         ["batched"])
    return results


def _set_buffer_pool(engine: Engine, size_bytes: int) -> None:
    with engine.connect() as conn:
        conn.execute(text(f"SET GLOBAL innodb_buffer_pool_size = {int(size_bytes)}"))


@contextlib.contextmanager
def buffer_pool(mysql_url: str, mb: int) -> Iterator[None]:
    """For the run, grow InnoDB's buffer pool to ``mb`` MiB (SET GLOBAL; needs the privilege) and
    put the old size back afterwards. A production database keeps its working set in memory; the
    1M-note table (~540 MB) does not fit the 128 MB default, and disk reads would swamp the figure."""
    engine = create_engine(mysql_url)
    with engine.connect() as conn:
        before = int(conn.execute(text("SELECT @@innodb_buffer_pool_size")).scalar_one())
    grow = mb > 0 and before < mb * 2**20
    try:
        if grow:
            _set_buffer_pool(engine, mb * 2**20)
            say(f"InnoDB buffer pool {before // 2**20} MB -> {mb} MB for this run")
    except SQLAlchemyError as err:
        say(f"could not grow the InnoDB buffer pool ({_reason(err)}); measuring with "
            f"{before // 2**20} MB")
        grow = False
    try:
        yield
    finally:
        if grow:
            _set_buffer_pool(engine, before)
            say(f"InnoDB buffer pool back to {before // 2**20} MB")
        engine.dispose()


def run(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, list[float]]]:
    plan = QUICK if args.quick else FULL
    client = redis.Redis.from_url(args.redis_url, socket_timeout=10, socket_connect_timeout=2)
    client.ping()
    bench = Bench(plan, args.mysql_url, args.redis_url, client, seed=args.seed)
    say(f"{'quick' if args.quick else 'full'} run {bench.run}: keys under {bench.base}:*")
    started = dt.datetime.now(dt.UTC)
    try:
        with buffer_pool(args.mysql_url, args.innodb_buffer_pool_mb):
            graph = open_graph(bench, plan.main_size)
            try:
                results = measure(bench, graph)
            finally:
                graph.engine.dispose()
    finally:
        delete_keys(client, bench.base)
        client.close()
    head = {"schema": 1, "mode": "quick" if args.quick else "full", "run": bench.run,
            "started_at": started.isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - _STARTED, 1), "plan": asdict(plan)}
    return {**head, **results}, bench.samples


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m ops.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100k notes only (under 3 minutes)")
    parser.add_argument("--mysql-url", default="mysql+pymysql://root@127.0.0.1:3306",
                        help="SQLAlchemy URL of the MariaDB/MySQL server (no database)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0",
                        help="Redis for the snapshots (the broker takes an empty database of 15..8)")
    parser.add_argument("--out", default="benchmarks/results", help="where the report goes")
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    parser.add_argument("--innodb-buffer-pool-mb", type=int, default=0, metavar="MB",
                        help="grow InnoDB's buffer pool to MB for the run and restore it after "
                             "(SET GLOBAL; default 0: leave the server as it is)")
    return parser.parse_args(argv)


def _reason(err: BaseException) -> str:
    orig = getattr(err, "orig", None)
    lines = str(orig if orig is not None else err).strip().splitlines()
    return f"{err.__class__.__name__}: {lines[0] if lines else ''}"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    try:
        results, samples = run(args)
    except BenchError as err:
        say(f"error: {err}")
        return 1
    except (GraphRagError, SQLAlchemyError, redis.RedisError, httpx.HTTPError, OSError) as err:
        say(f"error: {_reason(err)}")
        return 1
    for path in write_report(results, samples, Path(args.out)):
        say(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
