"""Broker configuration without a broker: which Celery settings each URL scheme gets, how delays are
sent, and which URLs are refused at start-up (the RabbitMQ behaviour itself: tests/e2e)."""

from __future__ import annotations

import pytest

from graphrag.errors import ConfigurationError
from tasks.jobs import delay_options
from worker.broker import broker_conf, is_amqp
from worker.settings import load_settings


@pytest.mark.parametrize(("delay_s", "whole_seconds", "options"), [
    (0.05, False, {"countdown": 0.05}),
    (0.05, True, {"kwargs": {"wait_ms": 50}}),  # Celery refuses a countdown under 1 s on quorum queues
    (0.2, True, {"kwargs": {"wait_ms": 200}}),
    (2, True, {"countdown": 2}),
    (0, True, {}),
    (0, False, {}),
])
def test_sub_second_delays_are_waited_by_the_task_on_whole_second_brokers(
        delay_s: float, whole_seconds: bool, options: dict[str, object]) -> None:
    assert delay_options(delay_s, whole_seconds=whole_seconds) == options


def test_redis_keeps_its_visibility_timeout_and_rabbitmq_gets_quorum_queues() -> None:
    redis = broker_conf("redis://h:6379/1", delivery_limit=5, visibility_timeout_s=900)
    assert redis == {"broker_transport_options": {"visibility_timeout": 900}}
    amqp = broker_conf("amqp://u:p@h:5672/v", delivery_limit=5, visibility_timeout_s=900)
    assert [q.name for q in amqp["task_queues"]] == ["realtime", "bulk"]
    assert all(q.queue_arguments["x-queue-type"] == "quorum" for q in amqp["task_queues"])
    assert amqp["broker_transport_options"] == {"confirm_publish": True}
    assert [is_amqp(u) for u in ("amqp://h", "amqps://h", "pyamqp://h", "redis://h")] == [
        True, True, True, False]


@pytest.mark.parametrize(("url", "words"), [
    ("amqp//guest@host/", "unsupported scheme"),
    ("kafka://host:9092", "unsupported scheme 'kafka'"),
    ("amqp://guest:secret@:5672/", "bad host or port ':5672'"),
    ("redis://host:port/0", "bad host or port 'host:port'"),
])
def test_a_malformed_broker_url_names_the_variable_and_hides_the_password(url: str, words: str) -> None:
    with pytest.raises(ConfigurationError, match="BROKER_URL") as caught:
        load_settings(broker_url=url)
    assert words in str(caught.value) and "secret" not in str(caught.value)
    assert "Value error" not in str(caught.value)
