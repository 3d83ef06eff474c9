"""What the ``graphrag`` commands do, imported only when a command runs (:mod:`worker.cli.main`)."""

from __future__ import annotations

import datetime as dt
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import click
import orjson
from tqdm import tqdm

from graphrag import GraphRagError, InvalidParameter, Request, get_strategy, strategy_names
from graphrag.tree.compare import Trial, compare, render_table
from graphrag.wiki.model import Viewer
from service.answers import outcome_body, parse_ask
from service.audit import audit
from service.context import ContextService, require_model
from service.drain import requeue
from service.rebuild import start_full_rebuild
from storage.database import ensure_database, epoch_ms, open_engine
from worker.compose import Wiring, wall_ms
from worker.settings import Settings, load_settings

__all__ = [
    "audit_lines",
    "compare_report",
    "context_bytes",
    "forget_cdc",
    "init_database",
    "load_sample",
    "parse_now",
    "print_status",
    "queue_full_rebuild",
    "rebuild_here",
    "run_cdc_command",
]


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


def context_bytes(note_id: int, *, live: bool, database_url: str | None, strategy: str | None,
                  seed: int | None, token_limit: int | None, token_counter: str | None,
                  now: str | None, viewer: int | None = None, max_depth: int | None = None,
                  fmt: str = "json") -> bytes:
    """What ``graphrag context`` prints: the result JSON, or the markdown text (``fmt``), computed
    now (``live``) or through the snapshot reader."""
    settings = load_settings(database_url=database_url)
    wiring = Wiring(settings, counter_name=token_counter)
    who = None if viewer is None else Viewer(user_id=viewer)
    if not live:
        served = wiring.reader().get(note_id, token_limit=token_limit or None, seed=seed,
                                     strategy=strategy, viewer=who, fmt=fmt)
        return _printable(served.text) if fmt == "markdown" else served.body
    wiring.source.check()
    name = strategy or settings.default_strategy(wiring.source.model)
    require_model(name, wiring.source)
    request = _live_request(settings, note_id, name, seed=seed, token_limit=token_limit,
                            now_ms=parse_now(now), viewer=who, max_depth=max_depth)
    outcome = wiring.service.compute(request, name)
    ask = parse_ask(note_id, strategy=name, token_limit=request.token_limit or 1, seed=request.seed,
                    viewer=who, fmt=fmt, seeds=(request.int_seed,),
                    max_token_limit=settings.max_token_limit)
    answer = outcome_body(outcome, ask)
    return _printable(answer.text) if fmt == "markdown" else answer.body


def follow_context(note_id: int, *, database_url: str | None, strategy: str | None,
                   seed: int | None, token_limit: int | None, viewer: int | None,
                   fmt: str, until: Callable[[], bool]) -> Iterator[bytes]:
    """What ``graphrag context --follow`` prints: the context through the reader, now and each time
    its bytes change (:mod:`worker.cli.follow`)."""
    from worker.cli.follow import follow

    wiring = Wiring(load_settings(database_url=database_url))
    reader, who = wiring.reader(), None if viewer is None else Viewer(user_id=viewer)

    def read() -> bytes:
        served = reader.get(note_id, token_limit=token_limit or None, seed=seed, strategy=strategy,
                            viewer=who, fmt=fmt)
        return _printable(served.text) if fmt == "markdown" else served.body

    listener = wiring.changes.listener()
    try:
        yield from follow(read, listener, note_id, until=until)
    finally:
        listener.close()


def _live_request(settings: Settings, note_id: int, strategy: str, *, seed: int | None,
                  token_limit: int | None, now_ms: int, viewer: Viewer | None,
                  max_depth: int | None) -> Request:
    """A live request: the strategy's default tokenLimit and seed rules (a trace strategy is
    seedless without ``--seed`` and traces only what the asked tokenLimit can use)."""
    spec = get_strategy(strategy)
    traced = spec.limits == "trace"
    if (viewer is not None or max_depth is not None) and not traced:
        raise click.UsageError(f"--viewer and --max-depth apply to {', '.join(strategy_names('wiki'))}")
    limit = token_limit if token_limit is not None else (
        spec.default_token_limit or settings.max_token_limit)
    chosen = seed if traced or seed is not None else settings.seeds[0]
    traversal = limit if traced else settings.max_token_limit
    return Request(note_id, chosen, limit, now_ms, traversal_token_limit=traversal, viewer=viewer,
                   max_depth=max_depth)


def _printable(text: str | None) -> bytes:
    """Markdown as UTF-8; half a surrogate pair (a Java cut can leave one) prints as ``?`` as
    Java's encoder writes it."""
    return (text or "").encode("utf-8", "replace")


def rebuild_here(database_url: str | None, note_ids: tuple[int, ...], everything: bool) -> None:
    """Rebuild in this process, with a progress bar on a TTY and one summary line."""
    wiring = Wiring(load_settings(database_url=database_url))
    wiring.source.check()
    wiring.cache.ping()
    wiring.check_binding()
    if everything:  # as the nightly run: read afresh, and not overwritten by older reads
        start_full_rebuild(wiring.cache)
    total = wiring.source.count_live() if everything else len(note_ids)
    progress = wiring.progress("manual")
    run_id = uuid.uuid4().hex
    progress.start(run_id, now_ms=wall_ms())
    progress.enqueued(run_id, total, last_id=0)
    progress.dispatched(run_id, now_ms=wall_ms())

    def advance(count: int) -> None:
        bar.update(count)
        progress.done(run_id, count, errors=0, now_ms=wall_ms())

    with tqdm(total=total, unit="note", disable=not sys.stderr.isatty(), file=sys.stderr) as bar:
        if everything:  # by pieces of the database, one workspace carried on (service.full_rebuild)
            pieces = wiring.source.workspaces(wiring.settings.rebuild_piece_notes)
            report = wiring.rebuild_pieces((p.ids for p in pieces), progress=advance)
        else:
            report = wiring.rebuild(note_ids, progress=advance)
    requeue(wiring.dirty, report.requeue, now_ms=wall_ms())  # raced edits: the workers redo them
    click.echo(report.summary(), err=True)
    for note_id, message in sorted(report.errors.items())[:10]:
        click.echo(f"  note {note_id}: {message}", err=True)
    if report.errors:
        sys.exit(1)


def queue_full_rebuild(database_url: str | None) -> None:
    """Hand a full rebuild to the workers (the nightly path)."""
    from kombu.exceptions import KombuError
    from kombu.utils.url import maybe_sanitize_url

    from worker.celery_app import create_celery

    settings = load_settings(database_url=database_url)
    try:
        create_celery(settings).send_task("graphrag.nightly_dispatch", queue="bulk", retry=False)
    except (KombuError, OSError) as err:
        where = maybe_sanitize_url(settings.broker_url)
        raise GraphRagError(f"broker unavailable ({where}): {err.__class__.__name__}") from err
    click.echo("full rebuild queued; follow it with `graphrag rebuild --status`", err=True)


def print_status(database_url: str | None) -> None:
    wiring = Wiring(load_settings(database_url=database_url))
    for name in ("nightly", "manual"):
        status = wiring.progress(name).status()
        if not status:
            click.echo(f"{name}: no run recorded")
            continue
        done, enqueued = int(status.get("done", 0)), int(status.get("enqueued", 0))
        state = "finished" if status.get("finishedAt") else "running"
        click.echo(f"{name}: {state}, {done}/{enqueued} notes rebuilt, "
                   f"{status.get('errors', 0)} errors, run {status.get('run')}")
    click.echo(f"dirty: {wiring.dirty.size()} notes waiting")


def compare_report(note_ids: tuple[int, ...], *, database_url: str | None, token_limit: int | None,
                   seed: int | None, token_counter: str | None, now: str | None,
                   fmt: str) -> bytes | str:
    """Every strategy of the database's model on the same notes, side by side."""
    settings = load_settings(database_url=database_url)
    wiring = Wiring(settings, counter_name=token_counter)
    wiring.source.check()
    limit = settings.max_token_limit if token_limit is None else token_limit
    now_ms, chosen_seed = parse_now(now), settings.seeds[0] if seed is None else seed
    names = strategy_names(wiring.source.model)
    if len(names) < 2:
        raise InvalidParameter("strategy", f"compare needs two strategies of one layout; "
                               f"{wiring.source.profile} has one ({', '.join(names)})")
    trials: dict[int, dict[str, Trial]] = {}
    for note_id in dict.fromkeys(note_ids):
        request = Request(note_id, chosen_seed, limit, now_ms, traversal_token_limit=limit)
        trials[note_id] = {s: _timed(wiring.service, request, s) for s in names}
    report = compare(trials)
    return orjson.dumps(report) if fmt == "json" else render_table(report)


def _timed(service: ContextService, request: Request, strategy: str) -> Trial:
    require_model(strategy, service.store)
    started = time.perf_counter()
    outcome = service.compute(request, strategy)
    return Trial(outcome, (time.perf_counter() - started) * 1000)


def audit_lines(sample: int, rng_seed: int | None, database_url: str | None) -> list[str]:
    wiring = Wiring(load_settings(database_url=database_url))
    report = audit(wiring.service, wiring.cache, sample=sample, now_ms=wall_ms(),
                   rng=random.Random(rng_seed))
    lines = [f"sampled {report.sampled} snapshots: {report.stale} stale ({report.stale_fraction:.1%})"]
    lines += [f"  note {f.note_id} {f.strategy}/seed {f.seed}: {f.reason}, "
              f"{f.differing_notes} related notes differ, computed {f.age_s:.0f} s ago"
              for f in report.worst]
    return lines


def init_database(database_url: str | None, schema: str = "doughnut-2026") -> str:
    """Create the tables of ``schema`` if none exist, in a database created first if the server
    has none of that name (demos and tests)."""
    url = load_settings(database_url=database_url).database_url
    ensure_database(url)
    engine = open_engine(url)
    if schema == "doughnut-2026":
        from storage.profiles import admin_2026
        from storage.profiles.doughnut_2026 import Doughnut2026

        admin_2026.create_tables(engine)
        Doughnut2026(engine).check()
        return "doughnut-2026 tables ready"
    from storage.profiles import admin_2025
    from storage.profiles.doughnut_2025 import Doughnut2025

    admin_2025.create_tables(engine)
    Doughnut2025(engine).check()
    return "note table ready"


def load_sample(database_url: str | None, schema: str = "doughnut-2026") -> str:
    """Fill an empty database with the bundled sample of ``schema``."""
    engine = open_engine(load_settings(database_url=database_url).database_url)
    if schema == "doughnut-2026":
        from storage.profiles.sample_2026 import load_sample_2026

        counts = load_sample_2026(engine)
        return (f"loaded {counts['note']} sample notes, {counts['note_wiki_title_cache']} link rows "
                f"and {counts['folder']} folders (doughnut-2026)")
    from storage.profiles import admin_2025
    from storage.profiles.doughnut_2025 import Doughnut2025
    from storage.sample import sample_notes

    admin_2025.create_tables(engine)
    source = Doughnut2025(engine)
    source.check()
    if source.any_note():
        raise GraphRagError("the note table is not empty; load the sample into a fresh database")
    count = admin_2025.insert_notes(engine, sample_notes())
    return f"loaded {count} sample notes"


def run_cdc_command(loglevel: str, metrics_port: int | None = None) -> None:
    """``graphrag cdc``: run change capture until SIGTERM or SIGINT; exit 1 if the lease was lost."""
    import logging
    import signal
    import threading

    from worker.cdc.capture import run_cdc

    logging.basicConfig(level=loglevel.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if not run_cdc(load_settings(), stop, metrics_port):
        raise GraphRagError("lost the change-capture lease to another instance; exiting")


def forget_cdc() -> str:
    """``graphrag cdc --forget``: delete change capture's stored position and heartbeat, so the
    readers stop waiting for its heartbeat (service.feed); refused while an instance runs."""
    from storage.redis.positions import RedisFeedHeartbeat, RedisPositions
    from worker.compose import Wiring

    settings = load_settings()
    wiring = Wiring(settings)
    lease = wiring.coordination.lock("cdc", ttl_ms=settings.cdc_lease_ms)
    if not lease.acquire():
        raise GraphRagError("an instance of graphrag cdc is running: stop it first")
    try:
        RedisFeedHeartbeat(wiring.client, wiring.keys).forget()
        RedisPositions(wiring.client, wiring.keys).forget()
    finally:
        lease.release()
    return ("forgot change capture's position and heartbeat: snapshots no longer wait for it "
            "(a later graphrag cdc starts at the server's current position)")
