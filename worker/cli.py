"""The ``graphrag`` command line. Errors print one line on stderr and exit non-zero."""

from __future__ import annotations

import datetime as dt
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from functools import wraps
from typing import Any, TypeVar

import click
import orjson
import uvicorn
from kombu.exceptions import KombuError
from kombu.utils.url import maybe_sanitize_url
from tqdm import tqdm

from graphrag import GraphRagError, Request
from graphrag.compare import Trial, compare, render_table
from graphrag.params import MAX_NOTE_ID, STRATEGIES
from graphrag.tokens import COUNTER_NAMES
from storage.audit import audit as run_audit
from storage.context import ContextService
from storage.dirty import DirtySet
from storage.progress import RebuildProgress
from storage.sample import sample_notes
from storage.sql import NoteStore, epoch_ms
from worker.celery_app import create_celery
from worker.compose import (
    build_reader,
    build_redis,
    build_service,
    build_snapshot_store,
    build_store,
    rebuild_notes,
    wall_ms,
)
from worker.server import build_http_app
from worker.settings import Settings, load_settings

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])

db_option = click.option(
    "--db", "database_url", metavar="URL", default=None,
    help="SQLAlchemy URL of the Doughnut database [env GRAPHRAG_DATABASE_URL; "
         "default: an embedded SQLite file graphrag.db].",
)


def reports_errors(func: F) -> F:
    """Turn the service's errors into one line on stderr and exit status 1."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except GraphRagError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def parse_now(value: str | None) -> int:
    """``--now`` as epoch ms; naive times are UTC; default: the current time."""
    if value is None:
        return epoch_ms(dt.datetime.now(dt.UTC))
    try:
        moment = dt.datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return epoch_ms(moment.astimezone(dt.UTC))
    except (ValueError, OverflowError):
        raise click.BadParameter(f"{value[:40]!r} is not an ISO-8601 time within years 1-9999",
                                 param_hint="--now") from None


class NoteId(click.ParamType):
    """Doughnut's ids are ``int unsigned``: ASCII digits up to 4294967295."""

    name = "NOTE_ID"

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        text = str(value)
        if not (text.isascii() and text.isdigit()) or len(text) > 10 or int(text) > MAX_NOTE_ID:
            self.fail(f"{text[:40]!r} is not a note id (an integer from 0 to {MAX_NOTE_ID})",
                      param, ctx)
        return int(text)


@click.group()
def main() -> None:
    """Graph RAG context snapshots for Doughnut."""


@main.command()
@click.argument("note_id", type=NoteId())
@click.option("--live", is_flag=True, help="Compute from the database now, not from a snapshot.")
@db_option
@click.option("--strategy", type=click.Choice(STRATEGIES), default=None)
@click.option("--seed", type=int, default=None, help="Sampling seed [default: first of GRAPHRAG_SEEDS].")
@click.option("--token-limit", type=click.IntRange(0, 1_000_000), default=None,
              help="Doughnut's tokenLimit, focus note included [default: GRAPHRAG_MAX_TOKEN_LIMIT].")
@click.option("--token-counter", type=click.Choice(COUNTER_NAMES), default=None)
@click.option("--now", "now", default=None, metavar="ISO-8601",
              help="With --live: the time recency is scored against [default: now].")
@click.option("--pretty", is_flag=True, help="Indent the JSON.")
@reports_errors
def context(note_id: int, live: bool, database_url: str | None, strategy: str | None,
            seed: int | None, token_limit: int | None, token_counter: str | None,
            now: str | None, pretty: bool) -> None:
    """Print the GraphRAGResult JSON of NOTE_ID (from its snapshot, or computed with --live)."""
    settings = load_settings(database_url=database_url)
    service = build_service(settings, token_counter)
    if live:
        result = _live(settings, service, note_id, strategy, seed, token_limit, parse_now(now))
    elif now is not None:
        raise click.BadParameter("applies to --live only (snapshots carry their own time)",
                                 param_hint="--now")
    else:
        store = build_snapshot_store(settings, build_redis(settings))
        reader = build_reader(settings, service, store)
        result = reader.get(note_id, token_limit=token_limit or None, seed=seed,
                            strategy=strategy).body
    if pretty:
        result = orjson.dumps(orjson.loads(result), option=orjson.OPT_INDENT_2)
    sys.stdout.buffer.write(result + b"\n")


def _live(settings: Settings, service: ContextService, note_id: int, strategy: str | None,
          seed: int | None, token_limit: int | None, now_ms: int) -> bytes:
    service.store.check_schema()
    limit = settings.max_token_limit if token_limit is None else token_limit
    request = Request(note_id, settings.seeds[0] if seed is None else seed, limit, now_ms,
                      traversal_token_limit=settings.max_token_limit)
    return service.compute(request, strategy or settings.strategy).to_json()


@main.command()
@click.argument("note_ids", type=NoteId(), nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Every live note, paged by id.")
@click.option("--queue", "queued", is_flag=True,
              help="With --all: hand the full rebuild to the workers (the nightly path).")
@click.option("--status", "status", is_flag=True, help="Show the last full rebuild's progress.")
@db_option
@reports_errors
def rebuild(note_ids: tuple[int, ...], everything: bool, queued: bool, status: bool,
            database_url: str | None) -> None:
    """Compute and store the snapshots of NOTE_IDs (or --all) for every configured seed/strategy."""
    settings = load_settings(database_url=database_url)
    if status:
        _print_status(settings)
        return
    if bool(note_ids) == everything or (queued and not everything):
        raise click.UsageError("give NOTE_IDs, --all, --all --queue or --status")
    if queued:
        _queue_full_rebuild(settings)
        return
    _rebuild_here(settings, note_ids, everything)


def _rebuild_here(settings: Settings, note_ids: tuple[int, ...], everything: bool) -> None:
    service = build_service(settings)
    service.store.check_schema()
    client = build_redis(settings)
    store = build_snapshot_store(settings, client)
    store.ping()
    ids = _all_live_ids(service.store) if everything else iter(note_ids)
    total = service.store.count_live() if everything else len(note_ids)
    progress = RebuildProgress(client, store.keys, "manual")
    run_id = uuid.uuid4().hex
    progress.start(run_id, now_ms=wall_ms())
    progress.enqueued(run_id, total, last_id=0)
    progress.dispatched(run_id, now_ms=wall_ms())

    def advance(count: int) -> None:
        bar.update(count)
        progress.done(run_id, count, errors=0, now_ms=wall_ms())

    with tqdm(total=total, unit="note", disable=not sys.stderr.isatty(), file=sys.stderr) as bar:
        report = rebuild_notes(settings, service, store, ids, progress=advance)
    if report.requeue:  # edits raced these rebuilds: the workers redo them (DESIGN §4)
        DirtySet(client, store.keys).add(report.requeue, now_ms=wall_ms())
    click.echo(report.summary(), err=True)
    for note_id, message in sorted(report.errors.items())[:10]:
        click.echo(f"  note {note_id}: {message}", err=True)
    if report.errors:
        sys.exit(1)


def _queue_full_rebuild(settings: Settings) -> None:
    try:
        create_celery(settings).send_task("graphrag.nightly_dispatch", queue="bulk", retry=False)
    except (KombuError, OSError) as err:
        where = maybe_sanitize_url(settings.broker_url)
        raise GraphRagError(f"broker unavailable ({where}): {err.__class__.__name__}") from err
    click.echo("full rebuild queued; follow it with `graphrag rebuild --status`", err=True)


def _print_status(settings: Settings) -> None:
    client = build_redis(settings)
    store = build_snapshot_store(settings, client)
    for name in ("nightly", "manual"):
        status = RebuildProgress(client, store.keys, name).status()
        if not status:
            click.echo(f"{name}: no run recorded")
            continue
        done, enqueued = int(status.get("done", 0)), int(status.get("enqueued", 0))
        state = "finished" if status.get("finishedAt") else "running"
        click.echo(f"{name}: {state}, {done}/{enqueued} notes rebuilt, "
                   f"{status.get('errors', 0)} errors, run {status.get('run')}")
    click.echo(f"dirty: {DirtySet(client, store.keys).size()} notes waiting")


def _all_live_ids(store: NoteStore, page: int = 1000) -> Iterator[int]:
    after = 0
    while ids := store.live_ids_after(after, page):
        yield from ids
        after = ids[-1]


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@db_option
@reports_errors
def serve(host: str, port: int, database_url: str | None) -> None:
    """Serve GraphRAGResults over HTTP (needs GRAPHRAG_READER_TOKEN)."""
    settings = load_settings(database_url=database_url)
    uvicorn.run(build_http_app(settings), host=host, port=port, log_level="info")


@main.command("compare")
@click.argument("note_ids", type=NoteId(), nargs=-1, required=True)
@db_option
@click.option("--token-limit", type=click.IntRange(0, 1_000_000), default=None,
              help="tokenLimit for every strategy [default: GRAPHRAG_MAX_TOKEN_LIMIT].")
@click.option("--seed", type=int, default=None, help="Sampling seed [default: first of GRAPHRAG_SEEDS].")
@click.option("--token-counter", type=click.Choice(COUNTER_NAMES), default=None)
@click.option("--now", "now", default=None, metavar="ISO-8601")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@reports_errors
def compare_command(note_ids: tuple[int, ...], database_url: str | None, token_limit: int | None,
                    seed: int | None, token_counter: str | None, now: str | None, fmt: str) -> None:
    """Run every strategy on the same notes and show what switching strategy would change."""
    settings = load_settings(database_url=database_url)
    service = build_service(settings, token_counter)
    service.store.check_schema()
    limit = settings.max_token_limit if token_limit is None else token_limit
    now_ms, chosen_seed = parse_now(now), settings.seeds[0] if seed is None else seed
    trials: dict[int, dict[str, Trial]] = {}
    for note_id in dict.fromkeys(note_ids):
        request = Request(note_id, chosen_seed, limit, now_ms, traversal_token_limit=limit)
        trials[note_id] = {s: _timed(service, request, s) for s in STRATEGIES}
    report = compare(trials)
    if fmt == "json":
        sys.stdout.buffer.write(orjson.dumps(report) + b"\n")
    else:
        click.echo(render_table(report))


def _timed(service: ContextService, request: Request, strategy: str) -> Trial:
    started = time.perf_counter()
    outcome = service.compute(request, strategy)
    return Trial(outcome, (time.perf_counter() - started) * 1000)


@main.command()
@click.option("--concurrency", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--queues", default="realtime,bulk", show_default=True)
@click.option("--loglevel", default="info", show_default=True)
@reports_errors
def worker(concurrency: int, queues: str, loglevel: str) -> None:
    """Run a Celery worker (same as `celery -A worker.app worker`)."""
    celery = create_celery(load_settings())
    celery.worker_main(["worker", f"--concurrency={concurrency}", f"--queues={queues}",
                        f"--loglevel={loglevel}"])


@main.command()
@click.option("--loglevel", default="info", show_default=True)
@reports_errors
def beat(loglevel: str) -> None:
    """Run the single-instance scheduler (same as `celery -A worker.app beat`)."""
    create_celery(load_settings()).start(["beat", f"--loglevel={loglevel}"])


@main.command()
@click.option("--sample", type=click.IntRange(1, 100_000), default=200, show_default=True)
@click.option("--seed", "rng_seed", type=int, default=None, help="Seed of the sampling.")
@db_option
@reports_errors
def audit(sample: int, rng_seed: int | None, database_url: str | None) -> None:
    """Recompute a sample of snapshots live; report the stale fraction and the worst."""
    settings = load_settings(database_url=database_url)
    service = build_service(settings)
    store = build_snapshot_store(settings, build_redis(settings))
    report = run_audit(service, store, sample=sample, now_ms=wall_ms(),
                       rng=random.Random(rng_seed))
    click.echo(f"sampled {report.sampled} snapshots: {report.stale} stale "
               f"({report.stale_fraction:.1%})")
    for f in report.worst:
        click.echo(f"  note {f.note_id} {f.strategy}/seed {f.seed}: {f.reason}, "
                   f"{f.differing_notes} related notes differ, computed {f.age_s:.0f} s ago")


@main.group()
def db() -> None:
    """Demo database commands (never run these against Doughnut's production database)."""


@db.command("init")
@db_option
@reports_errors
def db_init(database_url: str | None) -> None:
    """Create a Doughnut-shaped ``note`` table if none exists."""
    store = build_store(load_settings(database_url=database_url))
    store.create_table()
    store.check_schema()
    click.echo("note table ready", err=True)


@db.command("load-sample")
@db_option
@reports_errors
def db_load_sample(database_url: str | None) -> None:
    """Fill an empty ``note`` table with the bundled sample notebook."""
    store = build_store(load_settings(database_url=database_url))
    store.create_table()
    store.check_schema()
    if store.live_ids_after(0, 1) or store.any_note():
        raise GraphRagError("the note table is not empty; load the sample into a fresh database")
    rows = [n._asdict() for n in sample_notes()]
    store.insert([_sample_row(r) for r in rows])
    click.echo(f"loaded {len(rows)} sample notes", err=True)


def _sample_row(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": r["id"], "parent_id": r["parent_id"], "target_note_id": r["target_note_id"],
        "sibling_order": r["sibling_order"], "topic_constructor": r["title"],
        "description": r["details"], "created_at": r["created_at"], "updated_at": r["created_at"],
        "deleted_at": r["deleted_at"], "notebook_id": r["notebook_id"], "creator_id": 1,
    }
