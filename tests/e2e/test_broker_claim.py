"""The broker databases of the end-to-end tests: a killed run's leftovers block nothing, and a
running claim or someone else's data is never taken (tests.e2e.conftest.broker_database)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.e2e.conftest import BROKER_DBS, CLAIM_KEY, _claim, connect, redis_url

pytestmark = pytest.mark.redis


@pytest.fixture
def spare():
    """A broker database held by this test through a claim, emptied for each case."""
    from tests.e2e.conftest import broker_database

    with broker_database(redis_url()) as url:
        client = connect(url, "the broker database")
        client.flushdb()
        try:
            yield client
        finally:
            client.flushdb()  # whatever a case left, its claims and "foreign" data included
            client.close()


def _gone_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_a_killed_runs_claim_is_taken_over(spare) -> None:
    spare.set(CLAIM_KEY, f"{socket.gethostname()}:{_gone_pid()}:old")
    spare.rpush("realtime", b"task")
    assert _claim(spare, "new") is True
    assert spare.get(CLAIM_KEY) == b"new" and spare.dbsize() == 1


def test_kombu_leftovers_without_a_claim_are_taken_over(spare) -> None:
    spare.rpush("bulk", b"task")
    spare.set("_kombu.binding.realtime", b"x")
    assert _claim(spare, "new") is True
    assert spare.dbsize() == 1


def test_a_live_claim_and_foreign_data_are_left_alone(spare) -> None:
    spare.set(CLAIM_KEY, f"{socket.gethostname()}:1:running")  # pid 1 is alive
    assert _claim(spare, "new") is False
    spare.delete(CLAIM_KEY)
    spare.set("someone:else", b"data")
    assert _claim(spare, "new") is False
    assert spare.get("someone:else") == b"data" and not spare.exists(CLAIM_KEY)
    assert len(BROKER_DBS) == 8
