"""The binary-log reader against a real MariaDB: plain SQL in, committed transactions out."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pymysql  # type: ignore[import-untyped,unused-ignore]
import pytest

from storage.binlog import (
    BinlogPosition,
    BinlogUnavailable,
    PositionPurged,
    SchemaChanged,
    Transaction,
    current_position,
    stream,
)
from tests.binlog_server import execute

pytestmark = pytest.mark.mariadb

SERVER_ID = 4242
WATCHED = {"note"}
KINDS = ("gtid", "file")


def drain(url: str, start: BinlogPosition, watched: set[str] = WATCHED) -> list[Any]:
    """Everything the log holds after ``start`` (the stream returns at the log's end)."""
    return list(stream(url, server_id=SERVER_ID, watched_tables=watched, start=start, follow=False))


def changes(items: list[Any]) -> list[list[tuple[str, str | None, str | None]]]:
    """Per item: (kind, title before, title after) of each change: what the tests' SQL says."""
    def title(image: dict[str, Any] | None) -> str | None:
        return None if image is None else image["title"]

    return [[(c.kind, title(c.before), title(c.after)) for c in item.changes] for item in items]


def test_insert_update_delete_reach_the_consumer_with_full_images(cdc_db: str) -> None:
    start = current_position(cdc_db)
    execute(
        cdc_db,
        "INSERT INTO note (id, parent_id, title, details) VALUES (10, NULL, 'first', 'body')",
        "UPDATE note SET title = 'second', parent_id = 3 WHERE id = 10",
        "DELETE FROM note WHERE id = 10",
    )
    items = drain(cdc_db, start)
    assert [type(i) for i in items] == [Transaction] * 3
    insert, update, delete = (i.changes[0] for i in items)
    assert (insert.kind, insert.before, insert.after["title"]) == ("insert", None, "first")
    assert set(insert.after) == {"id", "parent_id", "target_note_id", "sibling_order", "title",
                                 "details", "created_at", "deleted_at"}
    assert update.before == insert.after
    assert update.after == {**insert.after, "title": "second", "parent_id": 3}
    assert (delete.kind, delete.before, delete.after) == ("delete", update.after, None)


def test_a_multi_statement_transaction_is_one_transaction_in_log_order(cdc_db: str) -> None:
    start = current_position(cdc_db)
    execute(
        cdc_db,
        "BEGIN",
        "INSERT INTO note (title) VALUES ('a'), ('b'), ('c')",
        "UPDATE note SET details = 'x' WHERE title IN ('a', 'c')",
        "INSERT INTO other VALUES (1, 'unwatched')",
        "DELETE FROM note WHERE title = 'b'",
        "COMMIT",
    )
    items = drain(cdc_db, start)
    assert changes(items) == [[
        ("insert", None, "a"), ("insert", None, "b"), ("insert", None, "c"),
        ("update", "a", "a"), ("update", "c", "c"), ("delete", "b", None),
    ]]
    assert [c.after["details"] for c in items[0].changes if c.kind == "update"] == ["x", "x"]


def test_a_rolled_back_transaction_changes_nothing(cdc_db: str) -> None:
    start = current_position(cdc_db)
    execute(cdc_db, "BEGIN", "INSERT INTO note (title) VALUES ('ghost')", "ROLLBACK")
    assert current_position(cdc_db) == start
    execute(cdc_db, "INSERT INTO note (title) VALUES ('real')")
    assert changes(drain(cdc_db, start)) == [[("insert", None, "real")]]


@pytest.mark.parametrize("kind", KINDS)
def test_unwatched_tables_are_left_out_but_advance_the_position(cdc_db: str, kind: str) -> None:
    start = current_position(cdc_db, kind=kind)  # type: ignore[arg-type]
    execute(cdc_db, "INSERT INTO other VALUES (1, 'a')", "UPDATE other SET label = 'b'")
    items = drain(cdc_db, start)
    assert [i.changes for i in items] == [(), ()]
    assert items[-1].position_after == current_position(cdc_db, kind=kind)  # type: ignore[arg-type]
    assert drain(cdc_db, items[-1].position_after) == []


def _history(url: str) -> None:
    execute(
        url,
        "INSERT INTO note (title) VALUES ('a')",
        "BEGIN",
        "INSERT INTO note (title) VALUES ('b'), ('c')",
        "INSERT INTO other VALUES (1, 'o')",
        "UPDATE note SET details = 'x' WHERE title IN ('a', 'b')",
        "COMMIT",
        "INSERT INTO other VALUES (2, 'p')",
        "FLUSH BINARY LOGS",  # the rest is in the next file
        "CREATE TABLE side (id INT PRIMARY KEY)",
        "DELETE FROM note WHERE title = 'c'",
        "BEGIN",
        "INSERT INTO note (title) VALUES ('rolled back')",
        "ROLLBACK",
        "UPDATE note SET title = 'A' WHERE title = 'a'",
    )


@pytest.mark.parametrize("kind", KINDS)
def test_resuming_from_every_emitted_position_neither_repeats_nor_skips(cdc_db: str, kind: str) -> None:
    start = current_position(cdc_db, kind=kind)  # type: ignore[arg-type]
    _history(cdc_db)
    items = drain(cdc_db, start)
    assert [c for c in changes(items) if c] == [
        [("insert", None, "a")],
        [("insert", None, "b"), ("insert", None, "c"), ("update", "a", "a"), ("update", "b", "b")],
        [("delete", "c", None)],
        [("update", "a", "A")],
    ]
    assert all(i.position_after.is_gtid == (kind == "gtid") for i in items)
    if kind == "file":
        assert len({i.position_after.file for i in items}) == 2  # the history spans a rotation
    for at, item in enumerate(items):
        assert drain(cdc_db, item.position_after) == items[at + 1 :], f"resumed after item {at}"


def test_stored_positions_round_trip_through_text(cdc_db: str) -> None:
    start = current_position(cdc_db, kind="file")
    _history(cdc_db)
    for item in drain(cdc_db, start):
        assert BinlogPosition.from_text(item.position_after.to_text()) == item.position_after
    gtid = current_position(cdc_db, kind="gtid")
    assert BinlogPosition.from_text(gtid.to_text()) == gtid


def test_ddl_and_truncate_on_a_watched_table_give_schema_changed(cdc_db: str) -> None:
    start = current_position(cdc_db)
    execute(
        cdc_db,
        "ALTER TABLE note ADD COLUMN color VARCHAR(10) NULL",
        "INSERT INTO note (title, color) VALUES ('after alter', 'red')",
        "ALTER TABLE other ADD COLUMN note INT NULL",  # a column named like the table: not note's DDL
        "TRUNCATE TABLE note",
        "RENAME TABLE note TO note_old, other TO note",
        "DROP TABLE note_old",
    )
    items = drain(cdc_db, start)
    schema = [(i.tables, i.statement_kind) for i in items if isinstance(i, SchemaChanged)]
    assert schema == [(("note",), "ALTER"), (("note",), "TRUNCATE"), (("note",), "RENAME")]
    inserted = next(i.changes[0].after for i in items if isinstance(i, Transaction) and i.changes)
    assert inserted is not None
    assert inserted["color"] == "red" and inserted["title"] == "after alter"  # real names, new column
    assert items[-1].position_after == current_position(cdc_db)


@pytest.mark.parametrize("kind", KINDS)
def test_a_purged_position_raises_position_purged(cdc_db: str, binlog_server: str, kind: str) -> None:
    old = current_position(cdc_db, kind=kind)  # type: ignore[arg-type]
    execute(cdc_db, "INSERT INTO note (title) VALUES ('x')", "FLUSH BINARY LOGS")
    newest = current_position(cdc_db, kind="file").file
    _purge_to(binlog_server, newest)
    with pytest.raises(PositionPurged) as raised:
        drain(cdc_db, old)
    assert "\n" not in str(raised.value)


def _purge_to(url: str, newest: str | None) -> None:
    """PURGE until only ``newest`` is left: MariaDB keeps a file until InnoDB's next flush (~1 s)
    has made its transactions durable, and says nothing when it keeps one."""
    deadline = time.monotonic() + 10
    while _binlog_files(url) != [newest]:
        assert time.monotonic() < deadline, f"the server kept {_binlog_files(url)}"
        execute(url, f"PURGE BINARY LOGS TO '{newest}'")
        time.sleep(0.1)


def _binlog_files(url: str) -> list[str]:
    conn = pymysql.connect(host="127.0.0.1", port=int(url.rsplit(":", 1)[1]), user="root")
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            return [str(row[0]) for row in cur.fetchall()]
    finally:
        conn.close()


def test_values_survive_the_round_trip(cdc_db: str) -> None:
    start = current_position(cdc_db)
    text = "émoji 😀, 漢字, 𝔘𝔫𝔦"
    execute(
        cdc_db,
        "SET time_zone = '+05:30'",  # the log stores TIMESTAMP in UTC whatever the session's zone
        "INSERT INTO note (id, parent_id, target_note_id, sibling_order, title, details, created_at,"
        f" deleted_at) VALUES (4294967295, 3000000000, NULL, -5, '{text}', NULL,"
        " '2026-01-02 03:04:05', '2026-01-02 03:04:05.678')",
    )
    after = drain(cdc_db, start)[0].changes[0].after
    assert after == _read_in_utc(cdc_db, 4294967295)
    assert after["deleted_at"] == dt.datetime(2026, 1, 1, 21, 34, 5, 678000)
    assert (after["id"], after["parent_id"], after["target_note_id"]) == (4294967295, 3000000000, None)
    assert (after["title"], after["details"], after["sibling_order"]) == (text, None, -5)


def _read_in_utc(url: str, note_id: int) -> dict[str, Any]:
    """The row as the service's SQL sessions read it (time_zone '+00:00')."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    conn = pymysql.connect(host=parsed.host, port=parsed.port, user="root", database=parsed.database,
                           charset="utf8mb4", cursorclass=pymysql.cursors.DictCursor,
                           init_command="SET time_zone = '+00:00'")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM note WHERE id = %s", (note_id,))
            return dict(cur.fetchone())
    finally:
        conn.close()


def test_following_returns_soon_after_stop_is_set(cdc_db: str) -> None:
    stop = threading.Event()
    start = current_position(cdc_db)
    seen: list[Any] = []

    def writer() -> None:
        time.sleep(0.3)
        execute(cdc_db, "INSERT INTO note (title) VALUES ('live')")

    thread = threading.Thread(target=writer)
    thread.start()
    began = time.monotonic()
    for item in stream(cdc_db, server_id=SERVER_ID, watched_tables=WATCHED, start=start, stop=stop,
                       heartbeat_s=0.2):
        seen.append(item)
        stop.set()
    thread.join()
    assert changes(seen) == [[("insert", None, "live")]]
    assert time.monotonic() - began < 5


def test_the_stream_says_once_when_the_server_sends_the_log(cdc_db: str) -> None:
    """``opened`` comes once, with the dump running, and what commits after it is read: ``graphrag
    cdc`` logs "following the log" then."""
    stop, dumps = threading.Event(), []
    seen: list[Any] = []

    def opened() -> None:
        dumps.append(len(_dump_threads(cdc_db)))
        seen.append("opened")
        execute(cdc_db, "INSERT INTO note (title) VALUES ('after')")

    guard = threading.Timer(10, stop.set)  # (never called: the stream would block for good)
    guard.start()
    for item in stream(cdc_db, server_id=SERVER_ID, watched_tables=WATCHED,
                       start=current_position(cdc_db), stop=stop, heartbeat_s=0.2, opened=opened):
        seen.append(item)
        stop.set()
    guard.cancel()
    assert dumps == [1]
    assert seen[0] == "opened" and changes(seen[1:]) == [[("insert", None, "after")]]


def test_a_killed_replication_connection_raises_instead_of_replaying(cdc_db: str) -> None:
    start = current_position(cdc_db)
    execute(cdc_db, "INSERT INTO note (title) VALUES ('one')")
    items = stream(cdc_db, server_id=SERVER_ID, watched_tables=WATCHED, start=start, heartbeat_s=0.2)
    assert changes([next(items)]) == [[("insert", None, "one")]]
    execute(cdc_db, *[f"KILL {pid}" for pid in _dump_threads(cdc_db)])
    with pytest.raises(BinlogUnavailable):
        next(items)  # the library alone would reconnect from `start` and send 'one' again


def _dump_threads(url: str) -> list[int]:
    conn = pymysql.connect(host="127.0.0.1", port=int(url.rsplit(":", 1)[1].split("/")[0]), user="root")
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'"
            )
            return [int(row[0]) for row in cur.fetchall()]
    finally:
        conn.close()


def _in_batches(url: str, statements: list[str], per_trip: int = 500) -> None:
    """Autocommitted statements, many per round trip (each still its own transaction)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    conn = pymysql.connect(host=parsed.host, port=parsed.port, user="root", database=parsed.database,
                           autocommit=True, client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    try:
        with conn.cursor() as cur:
            for at in range(0, len(statements), per_trip):
                cur.execute(";".join(statements[at : at + per_trip]))
                while cur.nextset():
                    pass
    finally:
        conn.close()


def test_throughput_of_single_row_updates(cdc_db: str, binlog_server: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Measured, not asserted: row events per second for 10,000 single-row committed updates."""
    updates = 10_000
    execute(binlog_server, "SET GLOBAL innodb_flush_log_at_trx_commit = 2", "SET GLOBAL sync_binlog = 0")
    execute(cdc_db, "INSERT INTO note (id, title) VALUES (1, 'n')")
    start = current_position(cdc_db)
    _in_batches(cdc_db, [f"UPDATE note SET sibling_order = {n} WHERE id = 1" for n in range(updates)])
    began_s, began_cpu_s = time.monotonic(), time.process_time()
    rows = sum(len(i.changes) for i in drain(cdc_db, start))
    elapsed_s, cpu_s = time.monotonic() - began_s, time.process_time() - began_cpu_s
    assert rows == updates
    with capsys.disabled():
        print(f"\nbinlog stream: {rows} single-row transactions in {elapsed_s:.2f} s "
              f"= {rows / elapsed_s:,.0f} row events/s ({rows / cpu_s:,.0f} per CPU second)")


@pytest.mark.parametrize(
    ("session", "kind"),
    [("SET SESSION binlog_row_image = 'MINIMAL'", "PARTIAL_IMAGE"),
     ("SET SESSION binlog_format = 'STATEMENT'", "STATEMENT")],
    ids=["minimal-image", "statement-format"],
)
def test_a_session_that_bypasses_full_row_images_gives_schema_changed(
    cdc_db: str, session: str, kind: str
) -> None:
    """The global settings pass the checks, but a session may override them: never guess rows."""
    execute(cdc_db, "INSERT INTO note (id, title) VALUES (1, 'a')")
    start = current_position(cdc_db)
    execute(cdc_db, session, "UPDATE note SET title = 'b' WHERE id = 1")
    execute(cdc_db, "UPDATE note SET title = 'c' WHERE id = 1")
    first, second = drain(cdc_db, start)
    assert isinstance(first, SchemaChanged) and (first.tables, first.statement_kind) == (("note",), kind)
    assert changes([second]) == [[("update", "b", "c")]]


def test_a_rotation_with_nothing_after_it_ends_a_catch_up_read(cdc_db: str) -> None:
    start = current_position(cdc_db, kind="file")
    execute(cdc_db, "FLUSH BINARY LOGS")
    began = time.monotonic()
    assert drain(cdc_db, start) == []
    assert time.monotonic() - began < 5


def test_rows_logged_without_column_names_are_not_guessed(cdc_db: str, binlog_server: str) -> None:
    """Events written while binlog_row_metadata was not FULL carry neither names nor signedness."""
    start = current_position(cdc_db)
    execute(binlog_server, "SET GLOBAL binlog_row_metadata = 'NO_LOG'")
    try:
        execute(cdc_db, "INSERT INTO note (id, title) VALUES (4294967295, 'unnamed')")
    finally:
        execute(binlog_server, "SET GLOBAL binlog_row_metadata = 'FULL'")
    execute(cdc_db, "INSERT INTO note (id, title) VALUES (7, 'named')")
    first, second = drain(cdc_db, start)
    assert isinstance(first, SchemaChanged) and first.statement_kind == "PARTIAL_IMAGE"
    assert second.changes[0].after["id"] == 7
