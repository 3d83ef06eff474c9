"""The ``graphrag`` command line as a user meets it: real processes, real files, one-line errors."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from storage.sample import SAMPLE_FOCUS_IDS

NOW = "2026-07-01T00:00:00Z"


def graphrag(*args: str) -> subprocess.CompletedProcess[bytes]:
    code = "from worker.cli.main import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'sample.db'}"
    assert graphrag("db", "init", "--schema", "doughnut-2025", "--db", url).returncode == 0
    loaded = graphrag("db", "load-sample", "--schema", "doughnut-2025", "--db", url)
    assert loaded.returncode == 0, loaded.stderr
    return url


def context(url: str, note: int | str, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return graphrag("context", str(note), "--live", "--db", url, "--now", NOW, *extra)


def assert_one_line_error(proc: subprocess.CompletedProcess[bytes], code: int, *words: str) -> None:
    err = proc.stderr.decode()
    assert proc.returncode == code, err
    assert proc.stdout == b""
    assert "Traceback" not in err
    for word in words:
        assert word in err


@pytest.mark.parametrize("strategy", ["wavefront", "layered"])
def test_same_inputs_give_identical_bytes_across_processes(sample_db: str, strategy: str) -> None:
    for note in SAMPLE_FOCUS_IDS.values():
        if note == SAMPLE_FOCUS_IDS["deleted"]:
            continue
        args = (sample_db, note, "--strategy", strategy, "--seed", "3")
        with ThreadPoolExecutor(2) as pool:  # two processes side by side, each its own hash seed
            first, second = pool.map(lambda call: context(*call), [args, args])
        assert first.returncode == 0, first.stderr
        assert first.stdout == second.stdout
        result = orjson.loads(first.stdout)
        assert set(result) == {"focusNote", "relatedNotes"}
        assert result["focusNote"]["uri"] == f"/n{note}"


def test_different_seeds_sample_differently(sample_db: str) -> None:
    monster = SAMPLE_FOCUS_IDS["monster_parent"]
    outputs = {context(sample_db, monster, "--seed", str(seed)).stdout for seed in range(4)}
    assert len(outputs) > 1


def test_pretty_is_the_same_json(sample_db: str) -> None:
    note = SAMPLE_FOCUS_IDS["link_note"]
    compact = context(sample_db, note).stdout
    pretty = context(sample_db, note, "--pretty").stdout
    assert pretty != compact
    assert orjson.loads(pretty) == orjson.loads(compact)


def test_token_limit_and_counter_are_honoured(sample_db: str) -> None:
    note = SAMPLE_FOCUS_IDS["hub"]
    one = orjson.loads(context(sample_db, note, "--token-counter", "one-per-note",
                               "--token-limit", "4").stdout)
    assert len(one["relatedNotes"]) == 3
    none = orjson.loads(context(sample_db, note, "--token-limit", "1").stdout)
    assert none["relatedNotes"] == []
    assert_one_line_error(context(sample_db, note, "--token-limit", "0"), 2, "--token-limit")


def test_unknown_and_deleted_notes_are_one_line_errors(sample_db: str) -> None:
    assert_one_line_error(context(sample_db, 999_999), 1, "999999", "does not exist")
    deleted = SAMPLE_FOCUS_IDS["deleted"]
    assert_one_line_error(context(sample_db, deleted), 1, str(deleted), "deleted")


@pytest.mark.parametrize("bad", ["abc", "1.5", "0x10"])
def test_non_numeric_ids_are_rejected(sample_db: str, bad: str) -> None:
    assert_one_line_error(context(sample_db, bad), 2, "not a note id")


def test_bad_now_is_rejected(sample_db: str) -> None:
    proc = graphrag("context", "1", "--live", "--db", sample_db, "--now", "yesterday")
    assert_one_line_error(proc, 2, "--now")


def test_unreachable_database(tmp_path: Path) -> None:
    proc = context("mysql+pymysql://root@127.0.0.1:1/doughnut", 1)
    assert_one_line_error(proc, 1, "database unreachable")
    assert_one_line_error(context("not a url", 1), 1, "not a valid SQLAlchemy URL")


def test_table_without_expected_columns_names_them(tmp_path: Path) -> None:
    path = tmp_path / "odd.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, topic_constructor TEXT)")
    proc = context(f"sqlite:///{path}", 1)
    assert_one_line_error(proc, 1, "parent_id", "deleted_at", "sibling_order")


def test_bad_setting_names_the_variable(sample_db: str) -> None:
    code = "from worker.cli.main import main; main()"
    env = {"GRAPHRAG_MAX_TOKEN_LIMIT": "lots", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code, "context", "1", "--live", "--db", sample_db],
                          capture_output=True, timeout=60, env=env)
    assert_one_line_error(proc, 1, "GRAPHRAG_MAX_TOKEN_LIMIT")


@pytest.mark.parametrize(("command", "url", "words"), [
    ("worker", "amqp://guest:guest@127.0.0.1:1/", ("cannot reach the broker", "127.0.0.1:1")),
    ("beat", "redis://127.0.0.1:1/0", ("cannot reach the broker", "127.0.0.1:1")),
    ("worker", "amqp//guest@host/", ("CELERY_BROKER_URL", "must be Redis or RabbitMQ")),
    ("worker", "amqp://guest:secret@:5672/", ("CELERY_BROKER_URL", "bad host or port")),
])
def test_an_unusable_broker_is_a_one_line_error(command: str, url: str, words: tuple[str]) -> None:
    env = {"CELERY_BROKER_URL": url, "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", "from worker.cli.main import main; main()", command],
                          capture_output=True, timeout=60, env=env)
    assert_one_line_error(proc, 1, "CELERY_BROKER_URL", *words)
    assert b"secret" not in proc.stderr


def test_load_sample_refuses_a_non_empty_table(sample_db: str) -> None:
    assert_one_line_error(graphrag("db", "load-sample", "--schema", "doughnut-2025", "--db",
                                   sample_db), 1, "not empty")


def test_compare_json_covers_three_strategies(sample_db: str) -> None:
    notes = [str(SAMPLE_FOCUS_IDS["hub"]), str(SAMPLE_FOCUS_IDS["link_note"])]
    proc = graphrag("compare", *notes, "--db", sample_db, "--now", NOW, "--format", "json",
                    "--token-limit", "1500")
    assert proc.returncode == 0, proc.stderr
    report = orjson.loads(proc.stdout)
    strategies = {"wavefront", "layered", "relationship-bfs"}
    assert [n["noteId"] for n in report["notes"]] == [int(n) for n in notes]
    for entry in (*report["notes"], report["total"]):
        assert set(entry["strategies"]) == strategies
        assert set(entry["overlap"]) == {"wavefront~layered", "wavefront~relationship-bfs",
                                         "layered~relationship-bfs"}
        assert all(0.0 <= v <= 1.0 for v in entry["overlap"].values())
        for stats in entry["strategies"].values():
            assert stats["tokens"] <= 1500 * len(notes)
            assert sum(stats["labels"].values()) == stats["relatedNotes"]
    total = report["total"]["strategies"]["wavefront"]["relatedNotes"]
    assert total == sum(n["strategies"]["wavefront"]["relatedNotes"] for n in report["notes"])


def test_compare_table_is_readable(sample_db: str) -> None:
    proc = graphrag("compare", str(SAMPLE_FOCUS_IDS["hub"]), "--db", sample_db, "--now", NOW)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode()
    for word in ("strategy", "wavefront", "layered", "relationship-bfs", "overlap", "total"):
        assert word in text


def test_relationship_bfs_is_accepted_and_ignores_the_seed(sample_db: str) -> None:
    note = SAMPLE_FOCUS_IDS["hub"]
    one = context(sample_db, note, "--strategy", "relationship-bfs", "--seed", "1")
    two = context(sample_db, note, "--strategy", "relationship-bfs", "--seed", "2")
    assert one.returncode == 0, one.stderr
    assert one.stdout == two.stdout


def test_compare_on_a_layout_with_one_strategy_is_a_one_line_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'today.db'}"
    for command in (("db", "init"), ("db", "load-sample")):
        done = graphrag(*command, "--schema", "doughnut-2026", "--db", url)
        assert done.returncode == 0, done.stderr
    assert_one_line_error(graphrag("compare", "5", "--db", url), 1, "focus-context", "doughnut-2026")


@pytest.mark.mariadb
def test_db_init_creates_the_database_it_names_and_keeps_one_that_exists() -> None:
    """A newcomer's stand-in: ``db init`` on a server without that database creates it (utf8mb4);
    run again, even after ``load-sample``, it keeps what is there."""
    import uuid

    from sqlalchemy import create_engine, text

    from tests.conftest import mysql_base_url, url_string

    name = f"graphrag_init_{uuid.uuid4().hex[:8]}"
    url = url_string(mysql_base_url().set(database=name))
    admin = create_engine(url_string(mysql_base_url()))
    try:
        for _ in range(2):
            done = graphrag("db", "init", "--db", url)
            assert done.returncode == 0 and b"doughnut-2026 tables ready" in done.stderr, done.stderr
        assert graphrag("db", "load-sample", "--db", url).returncode == 0
        again = graphrag("db", "init", "--db", url)
        assert again.returncode == 0, again.stderr
        with admin.connect() as conn:
            assert conn.execute(text(f"SELECT COUNT(*) FROM `{name}`.note")).scalar() > 0
            charset = conn.execute(text("SELECT DEFAULT_CHARACTER_SET_NAME FROM "
                                        "information_schema.SCHEMATA WHERE SCHEMA_NAME = :n"),
                                   {"n": name}).scalar()
        assert charset == "utf8mb4"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
        admin.dispose()
