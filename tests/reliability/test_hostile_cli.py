"""Hostile arguments to the CLI (issue 6, item 3).

The CLI runs as a subprocess (over the bundled sample notebook in SQLite) with hostile arguments
and settings -> a non-zero exit and one error line, never a traceback. Size:
``GRAPHRAG_RELIABILITY_SCALE`` (``ci`` runs a selection of the cases, ``full`` every one).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from storage.database import open_engine
from storage.sample import SAMPLE_FOCUS_IDS
from tests.reliability.support import (
    assert_clean_error,
    check_result,
    cli_env,
    graphrag,
    sample_rows,
    scale,
)
from tests.wiring import NoteStore

SCALE = scale()  # GRAPHRAG_RELIABILITY_SCALE: "ci" (default) or "full"


# -- the CLI --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CliCase:
    args: tuple[str, ...]
    codes: tuple[int, ...]
    words: tuple[str, ...] = ()
    ci: bool = True  # part of the CI-size run (the full run takes every case)
    env: tuple[tuple[str, str], ...] = ()


DB = "{db}"  # replaced by the sample database's URL
HUGE = "9" * 25
DIGITS_5000 = "1" * 5000

CLI_CASES: dict[str, Any] = {
    # usage errors: exit 2
    "no-command-args": CliCase(("context",), (2,), ("NOTE_ID",)),
    "unknown-command": CliCase(("explode",), (2,), ("No such command",), ci=False),
    "unknown-option": CliCase(("context", "1", "--live", "--db", DB, "--bogus"), (2,), ("--bogus",)),
    "empty-id": CliCase(("context", "", "--live", "--db", DB), (2,), ("not a note id",)),
    "negative-id": CliCase(("context", "-1", "--live", "--db", DB), (2,), ci=False),
    "text-id": CliCase(("context", "abc", "--live", "--db", DB), (2,), ("not a note id",), ci=False),
    "float-id": CliCase(("context", "1.5", "--live", "--db", DB), (2,), ("not a note id",), ci=False),
    "hex-id": CliCase(("context", "0x10", "--live", "--db", DB), (2,), ci=False),
    "padded-id": CliCase(("context", " 1", "--live", "--db", DB), (2,), ci=False),
    "emoji-id": CliCase(("context", "🍩", "--live", "--db", DB), (2,), ("not a note id",)),
    "cjk-id": CliCase(("context", "日本", "--live", "--db", DB), (2,), ci=False),
    "rtl-id": CliCase(("context", "\u202e12", "--live", "--db", DB), (2,), ci=False),
    "superscript-id": pytest.param(CliCase(("context", "²", "--live", "--db", DB), (2,),
                                           ("not a note id",))),
    "arabic-indic-id": pytest.param(CliCase(("context", "٣", "--live", "--db", DB), (2,),
                                            ("not a note id",), ci=False)),
    "fullwidth-id": pytest.param(CliCase(("context", "１２", "--live", "--db", DB), (2,),
                                         ("not a note id",), ci=False)),
    "5000-digit-id": pytest.param(CliCase(("context", DIGITS_5000, "--live", "--db", DB), (1, 2))),
    "two-ids": CliCase(("context", "1", "2", "--live", "--db", DB), (2,), ci=False),
    "token-limit-minus-1": CliCase(("context", "1", "--live", "--db", DB, "--token-limit", "-1"),
                                   (2,), ("--token-limit",)),
    "token-limit-too-big": CliCase(("context", "1", "--live", "--db", DB, "--token-limit",
                                    "1000001"), (2,), ("--token-limit",), ci=False),
    "token-limit-huge": CliCase(("context", "1", "--live", "--db", DB, "--token-limit", HUGE),
                                (2,), ("--token-limit",), ci=False),
    "token-limit-text": CliCase(("context", "1", "--live", "--db", DB, "--token-limit", "lots"),
                                (2,), ("--token-limit",), ci=False),
    "token-limit-empty": CliCase(("context", "1", "--live", "--db", DB, "--token-limit", ""),
                                 (2,), ("--token-limit",), ci=False),
    "seed-text": CliCase(("context", "1", "--live", "--db", DB, "--seed", "x"), (2,), ("--seed",),
                         ci=False),
    "seed-5000-digits": CliCase(("context", "1", "--live", "--db", DB, "--seed", DIGITS_5000),
                                (2,), ("--seed",), ci=False),
    "strategy-empty": CliCase(("context", "1", "--live", "--db", DB, "--strategy", ""), (2,),
                              ("--strategy",), ci=False),
    "counter-unknown": CliCase(("context", "1", "--live", "--db", DB, "--token-counter", "🍩"),
                               (2,), ("--token-counter",), ci=False),
    "now-text": CliCase(("context", "1", "--live", "--db", DB, "--now", "yesterday"), (2,),
                        ("--now",)),
    "now-empty": CliCase(("context", "1", "--live", "--db", DB, "--now", ""), (2,), ("--now",),
                         ci=False),
    "now-year-1-east": pytest.param(
        CliCase(("context", "1", "--live", "--db", DB, "--now", "0001-01-01T00:00:00+14:00"), (2,),
                ("--now",))),
    "now-year-9999-west": pytest.param(
        CliCase(("context", "1", "--live", "--db", DB, "--now", "9999-12-31T23:59:59-14:00"), (2,),
                ("--now",), ci=False)),
    "now-without-live": CliCase(("context", "1", "--db", DB, "--now", "2026-01-01"), (2,),
                                ("--live",), ci=False),
    "compare-no-ids": CliCase(("compare", "--db", DB), (2,), ci=False),
    "compare-text-id": CliCase(("compare", "1", "x", "--db", DB), (2,), ("not a note id",),
                               ci=False),
    "compare-format": CliCase(("compare", "1", "--db", DB, "--format", "xml"), (2,), ("--format",),
                              ci=False),
    "rebuild-nothing": CliCase(("rebuild", "--db", DB), (2,)),
    "rebuild-ids-and-all": CliCase(("rebuild", "1", "--all", "--db", DB), (2,), ci=False),
    "rebuild-queue-ids": CliCase(("rebuild", "1", "--queue", "--db", DB), (2,), ci=False),
    "audit-sample-0": CliCase(("audit", "--sample", "0", "--db", DB), (2,), ("--sample",)),
    "audit-sample-huge": CliCase(("audit", "--sample", HUGE, "--db", DB), (2,), ("--sample",),
                                 ci=False),
    "serve-port-0": CliCase(("serve", "--port", "0"), (2,), ("--port",), ci=False),
    "serve-port-70000": CliCase(("serve", "--port", "70000"), (2,), ("--port",), ci=False),
    "db-unknown": CliCase(("db", "drop-everything"), (2,), ci=False),
    # runtime errors: exit 1, one line
    "unknown-id": CliCase(("context", "999999", "--live", "--db", DB), (1,), ("999999",)),
    "id-zero": CliCase(("context", "0", "--live", "--db", DB), (1,), ("0",), ci=False),
    "deleted-id": CliCase(("context", str(SAMPLE_FOCUS_IDS["deleted"]), "--live", "--db", DB), (1,),
                          ("deleted",), ci=False),
    "int64-max-id": CliCase(("context", str(2**63 - 1), "--live", "--db", DB), (2,),
                            ("not a note id",), ci=False),
    "uint32-max-id": CliCase(("context", str(2**32 - 1), "--live", "--db", DB), (1,),
                             ("does not exist",)),
    "huge-id": pytest.param(CliCase(("context", HUGE, "--live", "--db", DB), (1, 2))),
    "compare-huge-id": pytest.param(CliCase(("compare", str(2**64), "--db", DB), (1, 2), ci=False)),
    "db-empty-url": CliCase(("context", "1", "--live", "--db", ""), (1,), ci=False),
    "db-not-a-url": CliCase(("context", "1", "--live", "--db", "🍩://x"), (1,)),
    "db-missing-dir": CliCase(("context", "1", "--live", "--db", "sqlite:////nonexistent/dir/x.db"),
                              (1,), ci=False),
    "db-unreachable": CliCase(("context", "1", "--live", "--db",
                               "mysql+pymysql://root@127.0.0.1:1/x"), (1,), ("unreachable",),
                              ci=False),
    "db-init-unreachable": pytest.param(
        CliCase(("db", "init", "--db", "mysql+pymysql://root@127.0.0.1:1/x"), (1,))),
    "load-sample-unreachable": pytest.param(
        CliCase(("db", "load-sample", "--db", "mysql+pymysql://root@127.0.0.1:1/x"), (1,),
                ci=False)),
    "snapshot-redis-down": CliCase(("context", "1", "--db", "mysql+pymysql://root@127.0.0.1:1/x"),
                                   (1,), ci=False),
    "rebuild-redis-down": CliCase(("rebuild", "1", "--db", DB), (1,), ("redis",), ci=False),
    "setting-bad": CliCase(("context", "1", "--live", "--db", DB), (1,),
                           ("GRAPHRAG_MAX_TOKEN_LIMIT",), env=(("GRAPHRAG_MAX_TOKEN_LIMIT", "-1"),)),
    "setting-seeds-empty": CliCase(("context", "1", "--live", "--db", DB), (1,), ("GRAPHRAG_SEEDS",),
                                   ci=False, env=(("GRAPHRAG_SEEDS", " , "),)),
    "setting-in-chunk-0": CliCase(("context", "1", "--live", "--db", DB), (1,),
                                  ("GRAPHRAG_IN_CHUNK",), ci=False, env=(("GRAPHRAG_IN_CHUNK", "0"),)),
}


def _case(value: Any) -> CliCase:
    return value.values[0] if hasattr(value, "values") else value


def _marks(value: Any) -> Any:
    return value.marks if hasattr(value, "marks") else ()


SELECTED = {name: value for name, value in CLI_CASES.items() if SCALE == "full" or _case(value).ci}


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every selected CLI case, run up front two at a time (each process pays ~1 s of imports)."""
    folder = tmp_path_factory.mktemp("cli")
    url = f"sqlite:///{folder / 'sample.db'}"
    engine = open_engine(url)
    notes = NoteStore(engine)
    notes.create_table()
    notes.insert(sample_rows())
    engine.dispose()

    def run(case: CliCase) -> Any:
        args = tuple(a.replace(DB, url) for a in case.args)
        return graphrag(*args, env=cli_env(**dict(case.env)), cwd=folder, timeout_s=120)

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run, _case(value)) for name, value in SELECTED.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=_marks(value), id=name) for name, value in SELECTED.items()])
def test_hostile_cli_arguments_fail_with_one_line(cli_runs: dict[str, Any], name: str) -> None:
    case = _case(CLI_CASES[name])
    assert_clean_error(cli_runs[name], case.codes, *case.words)


def test_huge_seeds_still_give_valid_json(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sample.db'}"
    engine = open_engine(url)
    notes = NoteStore(engine)
    notes.create_table()
    notes.insert(sample_rows())
    engine.dispose()
    note = SAMPLE_FOCUS_IDS["monster_parent"]
    proc = graphrag("context", str(note), "--live", "--db", url, "--seed", "-" + HUGE,
                    "--token-limit", "1000000", "--now", "1970-01-01T00:00:00Z", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    check_result(proc.stdout, note)
