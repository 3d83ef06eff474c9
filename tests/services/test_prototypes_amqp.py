# mypy: disable-error-code="no-untyped-call,attr-defined,untyped-decorator"
"""Prototype evidence for Celery 5.7.0 + kombu 5.7.0 on RabbitMQ (claim f of the scale-out plan).

Real worker processes of :mod:`tests.services.amqp_app` consume a durable quorum queue that Celery
declares from ``Queue(..., queue_arguments={"x-queue-type": "quorum", "x-delivery-limit": N,
"x-dead-letter-exchange": ..., "x-dead-letter-routing-key": ...})`` in a private vhost:

* a task raising ``Reject(requeue=True)``, a pool child SIGKILLed by its task and a whole (solo)
  worker SIGKILLed by its task are all redelivered until the delivery limit, then RabbitMQ
  dead-letters the message to ``<queue>.parked`` (``x-death`` reason ``delivery_limit``);
* the worker detects the quorum queue and turns global QoS off (RabbitMQ refuses it on quorum queues);
* ``queue_declare(passive=True).message_count`` counts ready messages only, not unacked ones;
* RabbitMQ before 3.11 credits a consumer twice when a message it rejected is parked, so after a
  poison message that consumer may hold one message more than its prefetch (a broker bug);
* publisher confirms make a failed publish raise at once instead of losing the message silently;
* countdown tasks go through Celery's native delayed delivery (``celery_delayed_*`` quorum queues)
  when the queue's exchange is a topic exchange; on a direct exchange the worker holds them unacked
  and, prefetch being static, stops taking other work until the ETA; a countdown published before
  any worker declared the delayed-delivery topology in the vhost fails with NOT_FOUND.
"""

from __future__ import annotations

import contextlib
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from amqp.exceptions import AMQPNotImplementedError, NotFound, PreconditionFailed
from celery import Celery
from kombu import Connection, Consumer
from kombu.transport.native_delayed_delivery import (
    bind_queue_to_native_delayed_delivery_exchange,
    declare_native_delayed_delivery_exchanges_and_queues,
)

from tests.services import ServiceUnavailable
from tests.services.amqp_app import create_app, parking_queue, work_queue
from tests.services.rabbitmq import rabbitmq_vhost, rabbitmqctl
from tests.services.workers import Worker, await_ready, celery_worker, events, start_worker, wait_until

LIMIT = 1


def worker_env(url: str, queue: str, limit: int = LIMIT, exchange_type: str = "topic") -> dict[str, str]:
    return {"PROTO_AMQP_URL": url, "PROTO_QUEUE": queue, "PROTO_DELIVERY_LIMIT": str(limit),
            "PROTO_EXCHANGE_TYPE": exchange_type}


def depth(url: str, queue: str) -> int:
    """Ready messages in ``queue`` (what a back-pressure check on AMQP reads)."""
    with Connection(url) as conn:
        return int(conn.default_channel.queue_declare(queue=queue, passive=True).message_count)


def wait_parked(url: str, queue: str, token: str, timeout_s: float = 30) -> dict[str, Any]:
    """The headers of the message whose first task argument is ``token``, once it is parked.

    Drains ``<queue>.parked`` meanwhile: every test parks one message with its own token."""
    deadline = time.monotonic() + timeout_s
    with Connection(url) as conn:
        bound = parking_queue(queue).bind(conn.default_channel)
        while time.monotonic() < deadline:
            message = bound.get(no_ack=True)
            if message is not None and message.payload[0][0] == token:
                return dict(message.headers)
            if message is None:
                time.sleep(0.05)
    pytest.fail(f"{token} did not reach {queue}.parked within {timeout_s:.0f} s", pytrace=False)


def runs(worker: Worker, token: str) -> list[dict[str, Any]]:
    return [e for e in events(worker.events_path) if e["token"] == token]


@pytest.fixture(scope="module")
def work(rabbitmq_module_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """One prefork worker (one child) on the quorum queue ``work`` (delivery limit 1)."""
    with celery_worker(tmp_path_factory.mktemp("work"), worker_env(rabbitmq_module_url, "work")) as w:
        yield w


@pytest.fixture(scope="module")
def app(rabbitmq_module_url: str) -> Celery:
    """The publishing side of ``work`` (publisher confirms on)."""
    return create_app(rabbitmq_module_url, "work", LIMIT)


def assert_parked_after_limit(url: str, worker: Worker, token: str) -> None:
    death = wait_parked(url, "work", token)["x-death"][0]
    assert (death["reason"], death["queue"], death["count"]) == ("delivery_limit", "work", 1)
    ran = runs(worker, token)
    assert [r["redelivered"] for r in ran] == [False] + [True] * LIMIT  # LIMIT + 1 deliveries


def test_rejected_poison_message_is_parked_after_the_delivery_limit(
        rabbitmq_module_url: str, work: Worker, app: Celery) -> None:
    token = f"reject-{uuid.uuid4().hex[:6]}"
    app.send_task("proto.reject", args=[token])
    assert_parked_after_limit(rabbitmq_module_url, work, token)


def test_message_killing_its_pool_child_is_parked_after_the_delivery_limit(
        rabbitmq_module_url: str, work: Worker, app: Celery) -> None:
    token = f"die-{uuid.uuid4().hex[:6]}"
    app.send_task("proto.die", args=[token])
    assert_parked_after_limit(rabbitmq_module_url, work, token)
    assert len({r["pid"] for r in runs(work, token)}) == LIMIT + 1  # a fresh child each time
    assert work.process.poll() is None


def test_message_killing_the_whole_worker_is_parked_after_the_delivery_limit(
        rabbitmq_module_url: str, tmp_path: Path) -> None:
    env, token = worker_env(rabbitmq_module_url, "solo", limit=1), f"solo-{uuid.uuid4().hex[:6]}"
    create_app(rabbitmq_module_url, "solo", 1).send_task("proto.die", args=[token])
    pids = []
    for attempt in range(2):  # delivery limit 1: two deliveries, two dead workers
        worker = start_worker(tmp_path, env, pool="solo", name=f"solo{attempt}")
        await_ready(worker, previous=attempt)
        assert worker.process.wait(timeout=30) == -9
        pids.append(worker.process.pid)
    assert [r["pid"] for r in events(tmp_path / "events.jsonl")] == pids
    wait_until(lambda: depth(rabbitmq_module_url, "solo.parked") == 1, 10, "solo.parked to fill")
    assert depth(rabbitmq_module_url, "solo") == 0


def test_depth_counts_ready_messages_not_unacked_ones(rabbitmq_module_url: str, tmp_path: Path) -> None:
    hold, token = tmp_path / "release", f"held-{uuid.uuid4().hex[:6]}"
    with celery_worker(tmp_path, worker_env(rabbitmq_module_url, "depth")) as worker:
        publisher = create_app(rabbitmq_module_url, "depth", LIMIT)
        publisher.send_task("proto.record", args=[token, str(hold)])
        wait_until(lambda: bool(runs(worker, token)), 10, "the held task to start")
        for n in range(3):
            publisher.send_task("proto.record", args=[f"{token}-{n}"])
        wait_until(lambda: depth(rabbitmq_module_url, "depth") == 3, 5, "three ready messages")
        time.sleep(0.3)
        assert depth(rabbitmq_module_url, "depth") == 3  # the unacked one (held by the worker) is not
        hold.touch()
        wait_until(lambda: all(runs(worker, f"{token}-{n}") for n in range(3)), 10, "the queued tasks")
        assert depth(rabbitmq_module_url, "depth") == 0


def test_parking_a_rejected_message_grants_its_consumer_an_extra_credit_before_3_11(
        rabbitmq_module_url: str) -> None:
    """RabbitMQ's own bug (rabbitmq-server pull request 5609, fixed for 3.11): when a message a
    consumer rejected is dead-lettered for exceeding the delivery limit, the consumer is credited
    twice, so from then on it may hold one more unacked message than its prefetch allows."""
    url, poison, seen = rabbitmq_module_url, work_queue("credit", 1), []
    with Connection(url) as conn:
        channel, producer = conn.channel(), conn.Producer(conn.channel())
        parking_queue("credit").bind(channel).declare()
        poison.bind(channel).declare()
        channel.basic_qos(0, 1, False)
        Consumer(channel, queues=[poison], callbacks=[lambda _b, m: seen.append(m)]).consume()
        producer.publish({"n": "poison"}, exchange="credit", routing_key="credit")
        for _ in range(2):  # two deliveries, each rejected; the second return parks it
            wait_until(lambda: bool(drain(conn) or seen), 5, "a delivery")
            seen.pop().reject(requeue=True)
        wait_until(lambda: depth(url, "credit.parked") == 1, 5, "the parked message")
        for n in range(3):
            producer.publish({"n": n}, exchange="credit", routing_key="credit")
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            drain(conn)
        version = tuple(int(p) for p in str(conn.connection.server_properties["version"]).split(".")[:2])
    assert len(seen) == (2 if version < (3, 11) else 1)


def drain(conn: Connection) -> bool:
    with contextlib.suppress(socket.timeout, TimeoutError):
        conn.drain_events(timeout=0.05)
    return False


def test_worker_turns_global_qos_off_which_quorum_queues_refuse(
        rabbitmq_module_url: str, work: Worker) -> None:
    assert "Global QoS is disabled. Prefetch count is now static." in work.log_tail(100_000)
    with Connection(rabbitmq_module_url) as conn:
        channel = conn.channel()
        channel.basic_qos(0, 1, True)
        with pytest.raises(AMQPNotImplementedError, match="does not support global qos"):
            channel.basic_consume("work", callback=lambda message: None)
        version = conn.connection.server_properties["version"]
    assert str(version).split(".")[0] in {"3", "4"}


def test_quorum_queue_arguments_cannot_change_on_redeclare(
        rabbitmq_module_url: str, work: Worker) -> None:
    with Connection(rabbitmq_module_url) as conn, pytest.raises(PreconditionFailed, match="x-delivery"):
        work_queue("work", LIMIT + 1).bind(conn.default_channel).declare()


def test_publisher_confirms_raise_on_a_failed_publish(rabbitmq_module_url: str) -> None:
    confirmed = create_app(rabbitmq_module_url, "work", LIMIT)
    with pytest.raises(NotFound, match="no exchange"):
        confirmed.send_task("proto.record", args=["x"], exchange="missing", routing_key="work")
    unconfirmed = create_app(rabbitmq_module_url, "work", LIMIT)
    unconfirmed.conf.broker_transport_options = {}
    unconfirmed.send_task("proto.record", args=["x"], exchange="missing", routing_key="work")  # lost


def test_countdown_on_a_topic_exchange_waits_in_the_broker(
        rabbitmq_module_url: str, work: Worker, app: Celery) -> None:
    token = f"later-{uuid.uuid4().hex[:6]}"
    sent = time.time()
    app.send_task("proto.record", args=[token], countdown=2)
    app.send_task("proto.record", args=[f"{token}-now"])
    assert depth(rabbitmq_module_url, "celery_delayed_1") == 1  # 2 s = bit 1: held by the broker
    wait_until(lambda: bool(runs(work, token)), 10, "the countdown task")
    now_at, later_at = runs(work, f"{token}-now")[0]["t_s"], runs(work, token)[0]["t_s"]
    assert now_at - sent < 1.5 <= later_at - sent
    with pytest.raises(ValueError, match="countdown must be a positive number"):
        app.send_task("proto.record", args=["x"], countdown=0.5)  # int(0.5) == 0


def test_countdown_needs_the_delayed_delivery_topology_that_workers_declare(rabbitmq_url: str) -> None:
    """A publisher in a vhost where no worker has started yet cannot send a countdown task until it
    declares the ``celery_delayed_*`` topology and binds its queue itself (what the worker does)."""
    with pytest.raises(NotFound, match="celery_delayed_27"):
        create_app(rabbitmq_url, "fresh", LIMIT).send_task("proto.record", args=["x"], countdown=1)
    with Connection(rabbitmq_url) as conn:
        declare_native_delayed_delivery_exchanges_and_queues(conn, "quorum")
        queue = work_queue("fresh", LIMIT)
        queue.bind(conn.default_channel).declare()
        bind_queue_to_native_delayed_delivery_exchange(conn, queue)
    create_app(rabbitmq_url, "fresh", LIMIT).send_task("proto.record", args=["x"], countdown=1)
    assert depth(rabbitmq_url, "fresh") == 0
    wait_until(lambda: depth(rabbitmq_url, "fresh") == 1, 10, "the delayed message to arrive")


def test_countdown_on_a_direct_exchange_blocks_the_worker_until_the_eta(
        rabbitmq_module_url: str, tmp_path: Path) -> None:
    with celery_worker(tmp_path, worker_env(rabbitmq_module_url, "direct", exchange_type="direct")) as w:
        direct = create_app(rabbitmq_module_url, "direct", LIMIT, "direct")
        sent = time.time()
        direct.send_task("proto.record", args=["later"], countdown=2)
        time.sleep(0.3)
        direct.send_task("proto.record", args=["now"])
        wait_until(lambda: bool(runs(w, "now")), 10, "the immediate task")
        assert runs(w, "now")[0]["t_s"] - sent >= 1.9  # waited behind the held ETA message
        assert "native delayed delivery do not support direct exchanges" in w.log_tail(100_000)


def test_consumer_timeout_is_readable() -> None:
    reply = rabbitmqctl("eval", "application:get_env(rabbit, consumer_timeout).").strip()
    assert reply.startswith("{ok,") and int(reply[4:-1]) > 0, reply


def test_vhost_fixture_fails_with_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHRAG_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:1/")
    with pytest.raises(ServiceUnavailable, match=r"nothing answers on 127\.0\.0\.1:1"), rabbitmq_vhost():
        pass
