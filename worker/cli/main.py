"""The ``graphrag`` command line. Errors print one line on stderr and exit non-zero.

Only click and the pure package are imported up front, so ``graphrag --help`` and argument errors
answer at once; each command imports what it needs when it runs (:mod:`worker.cli.commands`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from graphrag import GraphRagError, get_strategy, strategy_names
from graphrag.core.params import MAX_NOTE_ID, MAX_TOKEN_LIMIT_CEILING
from graphrag.core.tokens import COUNTER_NAMES

__all__ = ["main"]

F = TypeVar("F", bound=Callable[..., Any])

db_option = click.option(
    "--db", "database_url", metavar="URL", default=None,
    help="SQLAlchemy URL of the Doughnut database [env GRAPHRAG_DATABASE_URL; "
         "default: an embedded SQLite file graphrag.db].",
)
# The service's own read (GET /notes/{id}/graph), whose tokenLimit is 1 to the ceiling; only
# Doughnut's own paths take 0.
token_limit_option = click.option(
    "--token-limit", type=click.IntRange(1, MAX_TOKEN_LIMIT_CEILING), default=None,
    help=f"Doughnut's tokenLimit, focus note included [default: focus-context "
         f"{get_strategy('focus-context').default_token_limit}, the tree strategies "
         f"GRAPHRAG_MAX_TOKEN_LIMIT].")


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
@click.option("--strategy", type=click.Choice(strategy_names()), default=None)
@click.option("--seed", type=int, default=None,
              help="Sampling seed [default: today's Doughnut: its seedless order; the 2025 tree: one "
                   "of GRAPHRAG_SEEDS (with --live, the first)].")
@token_limit_option
@click.option("--token-counter", type=click.Choice(COUNTER_NAMES), default=None)
@click.option("--now", "now", default=None, metavar="ISO-8601",
              help="With --live: the time recency is scored against [default: now].")
@click.option("--pretty", is_flag=True, help="Indent the JSON.")
@click.option("--viewer", type=click.IntRange(0, MAX_NOTE_ID), default=None, metavar="USER_ID",
              help="Today's Doughnut: whose view [default: the notebook's owner].")
@click.option("--max-depth", type=click.IntRange(0, 10), default=None,
              help="With --live, today's Doughnut: how deep the wiki links are followed [2].")
@click.option("--format", "fmt", type=click.Choice(["json", "markdown"]), default="json",
              help="The result JSON (one line), or the markdown text exactly.")
@click.option("--follow", is_flag=True,
              help="Keep watching: print the context again each time it changes (Ctrl-C ends).")
@reports_errors
def context(note_id: int, live: bool, database_url: str | None, strategy: str | None,
            seed: int | None, token_limit: int | None, token_counter: str | None,
            now: str | None, pretty: bool, viewer: int | None, max_depth: int | None,
            fmt: str, follow: bool) -> None:
    """Print the context of NOTE_ID (from its snapshot, or computed with --live)."""
    from worker.cli.commands import context_bytes

    for value, hint in ((now, "--now"), (max_depth, "--max-depth")):
        if value is not None and not live:
            raise click.BadParameter("applies to --live only", param_hint=hint)
    if follow and live:
        raise click.BadParameter("follows snapshots: not with --live", param_hint="--follow")
    if follow:
        _follow(note_id, database_url=database_url, strategy=strategy, seed=seed,
                token_limit=token_limit, viewer=viewer, fmt=fmt, pretty=pretty)
        return
    _print_context(context_bytes(note_id, live=live, database_url=database_url, strategy=strategy,
                                 seed=seed, token_limit=token_limit, token_counter=token_counter,
                                 now=now, viewer=viewer, max_depth=max_depth, fmt=fmt), fmt, pretty)


def _follow(note_id: int, *, pretty: bool, **ask: Any) -> None:
    """Print each version until SIGINT or SIGTERM; the signal only sets a flag the loop checks
    between its waits (half a second), so it never lands in the middle of a read or a print."""
    import signal
    import threading

    from worker.cli.commands import follow_context

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    for version in follow_context(note_id, until=stop.is_set, **ask):
        _print_context(version, ask["fmt"], pretty)
        click.echo(f"-- the context of note {note_id} as of {_now_text()}", err=True)
        sys.stdout.flush()


def _now_text() -> str:
    import datetime as dt

    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def _print_context(result: bytes, fmt: str, pretty: bool) -> None:
    if fmt == "markdown":
        sys.stdout.buffer.write(result)
        return
    if pretty:
        import orjson

        with contextlib.suppress(orjson.JSONDecodeError):  # a lone surrogate escape: kept compact
            result = orjson.dumps(orjson.loads(result), option=orjson.OPT_INDENT_2)
    sys.stdout.buffer.write(result + b"\n")


@main.command()
@click.argument("note_ids", type=NoteId(), nargs=-1)
@click.option("--all", "everything", is_flag=True,
              help="Every live note, by pieces (notebooks, in order).")
@click.option("--queue", "queued", is_flag=True,
              help="With --all: hand the full rebuild to the workers (the nightly path).")
@click.option("--status", "status", is_flag=True, help="Show the last full rebuild's progress.")
@db_option
@reports_errors
def rebuild(note_ids: tuple[int, ...], everything: bool, queued: bool, status: bool,
            database_url: str | None) -> None:
    """Compute and store the snapshots of NOTE_IDs (or --all) for every configured seed/strategy."""
    from worker.cli import commands

    if status:
        commands.print_status(database_url)
        return
    if bool(note_ids) == everything or (queued and not everything):
        raise click.UsageError("give NOTE_IDs, --all, --all --queue or --status")
    if queued:
        commands.queue_full_rebuild(database_url)
        return
    commands.rebuild_here(database_url, note_ids, everything)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The internal listener's address (everything: the shared token, /metrics, ...).")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--public-host", default=None, help="The public listener's address [default: --host].")
@click.option("--public-port", type=click.IntRange(1, 65535), default=None,
              help="A public listener: Doughnut's two paths with Doughnut's credentials only, for the "
                   "proxy in front of Doughnut [env GRAPHRAG_PUBLIC_PORT; default: none].")
@db_option
@reports_errors
def serve(host: str, port: int, public_host: str | None, public_port: int | None,
          database_url: str | None) -> None:
    """Serve results over HTTP (needs GRAPHRAG_READER_TOKEN unless GRAPHRAG_READER_AUTH=doughnut)."""
    from worker.http.listen import Listeners
    from worker.http.listen import serve as run
    from worker.http.server import build_http_app
    from worker.settings import load_settings

    settings = load_settings(database_url=database_url, public_port=public_port)
    listeners = Listeners(host, port, public_host, settings.public_port)
    run(build_http_app(settings), listeners, header_timeout_s=settings.header_timeout_s,
        access_log=settings.access_log)


@main.command()
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="stdio for an agent that launches it; http: streamable HTTP at /mcp.")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --transport http.")
@click.option("--port", type=click.IntRange(1, 65535), default=8001, show_default=True,
              help="With --transport http.")
def mcp(transport: str, host: str, port: int) -> None:
    """Serve the snapshots to LLM agents over MCP: get_note_graph and get_note_context_markdown
    (http needs GRAPHRAG_READER_TOKEN as a bearer token)."""
    from worker.mcp.server import main as serve_mcp

    sys.exit(serve_mcp(["--transport", transport, "--host", host, "--port", str(port)]))


@main.command("compare")
@click.argument("note_ids", type=NoteId(), nargs=-1, required=True)
@db_option
@token_limit_option
@click.option("--seed", type=int, default=None, help="Sampling seed [default: first of GRAPHRAG_SEEDS].")
@click.option("--token-counter", type=click.Choice(COUNTER_NAMES), default=None)
@click.option("--now", "now", default=None, metavar="ISO-8601")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@reports_errors
def compare_command(note_ids: tuple[int, ...], database_url: str | None, token_limit: int | None,
                    seed: int | None, token_counter: str | None, now: str | None, fmt: str) -> None:
    """Run every strategy of the database's model on the same notes and show what switching
    strategy would change."""
    from worker.cli.commands import compare_report

    output = compare_report(note_ids, database_url=database_url, token_limit=token_limit,
                            seed=seed, token_counter=token_counter, now=now, fmt=fmt)
    if isinstance(output, bytes):
        sys.stdout.buffer.write(output + b"\n")
    else:
        click.echo(output)


@main.command()
@click.option("--concurrency", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--queues", default="realtime,bulk", show_default=True)
@click.option("--loglevel", default="info", show_default=True)
@reports_errors
def worker(concurrency: int, queues: str, loglevel: str) -> None:
    """Run a Celery worker (same as `celery -A worker.celery.app worker`, after checking the broker;
    with GRAPHRAG_WORKER_METRICS_PORT, serving Prometheus metrics)."""
    from worker.celery.metrics import prepare
    from worker.settings import load_settings

    settings = load_settings()
    prepare(settings)  # before the imports below: they import prometheus_client
    from worker.broker import check_broker
    from worker.celery.runtime import worker_app

    check_broker(settings.broker_url)
    celery = worker_app(settings)
    celery.worker_main(["worker", f"--concurrency={concurrency}", f"--queues={queues}",
                        f"--loglevel={loglevel}"])


@main.command()
@click.option("--loglevel", default="info", show_default=True)
@click.option("--metrics-port", type=click.IntRange(1, 65535), default=None,
              help="Serve Prometheus metrics (throughput, lag) on this port.")
@click.option("--forget", is_flag=True,
              help="Retire change capture here: delete its stored position and heartbeat and exit "
                   "(readers stop waiting for its heartbeat; refused while an instance runs).")
@reports_errors
def cdc(loglevel: str, metrics_port: int | None, forget: bool) -> None:
    """Follow the database's binary log and enqueue the events of every committed change."""
    from worker.cli.commands import forget_cdc, run_cdc_command

    if forget:
        click.echo(forget_cdc())
        return
    run_cdc_command(loglevel, metrics_port)


@main.command()
@click.option("--loglevel", default="info", show_default=True)
@reports_errors
def beat(loglevel: str) -> None:
    """Run the single-instance scheduler (same as `celery -A worker.celery.app beat`, after checking the
    broker)."""
    from worker.broker import check_broker
    from worker.celery.runtime import worker_app
    from worker.settings import load_settings

    settings = load_settings()
    check_broker(settings.broker_url)
    worker_app(settings).start(["beat", f"--loglevel={loglevel}"])


@main.command()
@click.option("--sample", type=click.IntRange(1, 100_000), default=200, show_default=True)
@click.option("--seed", "rng_seed", type=int, default=None, help="Seed of the sampling.")
@db_option
@reports_errors
def audit(sample: int, rng_seed: int | None, database_url: str | None) -> None:
    """Recompute a sample of snapshots live; report the stale fraction and the worst."""
    from worker.cli.commands import audit_lines

    for line in audit_lines(sample, rng_seed, database_url):
        click.echo(line)


@main.command()
@db_option
@reports_errors
def doctor(database_url: str | None) -> None:
    """Check that this deployment will work, before anything runs (exit 0 only when it will)."""
    from worker.cli.doctor import report
    from worker.settings import load_settings

    lines, healthy = report(load_settings(database_url=database_url))
    for line in lines:
        click.echo(line)
    sys.exit(0 if healthy else 1)


@main.group()
def prefix() -> None:
    """The database a key prefix (GRAPHRAG_REDIS_PREFIX) belongs to."""


@prefix.command("status")
@db_option
@reports_errors
def prefix_status(database_url: str | None) -> None:
    """Name the database the prefix is bound to, and this one."""
    from worker.cli.prefix import print_binding

    print_binding(database_url)


@prefix.command("take-over")
@click.option("--here", is_flag=True, help="Rebuild in this process instead of by the workers.")
@click.confirmation_option(prompt="Delete every snapshot under the key prefix and bind it to this "
                                  "database?", help="Do not ask.")
@db_option
@reports_errors
def prefix_take_over(here: bool, database_url: str | None) -> None:
    """Delete what the prefix holds, bind it to this database, then rebuild everything."""
    from worker.cli.prefix import take_prefix_over

    take_prefix_over(database_url, here=here)


@main.group()
def db() -> None:
    """Demo database commands (never run these against Doughnut's production database)."""


schema_option = click.option(
    "--schema", type=click.Choice(["doughnut-2026", "doughnut-2025"]), default="doughnut-2026",
    show_default=True, help="The table layout: today's Doughnut (folders and wiki links), or "
                            "Doughnut 2025's note tree.")


@db.command("init")
@db_option
@schema_option
@reports_errors
def db_init(database_url: str | None, schema: str) -> None:
    """Create Doughnut-shaped tables if none exist."""
    from worker.cli.commands import init_database

    click.echo(init_database(database_url, schema), err=True)


@db.command("load-sample")
@db_option
@schema_option
@reports_errors
def db_load_sample(database_url: str | None, schema: str) -> None:
    """Fill an empty database with the bundled sample notebooks."""
    from worker.cli.commands import load_sample

    click.echo(load_sample(database_url, schema), err=True)
