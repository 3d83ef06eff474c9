"""Broker configuration without a broker: which Celery settings each URL scheme gets and which URLs
are refused at start-up (the RabbitMQ behaviour itself: tests/e2e)."""

from __future__ import annotations

import pytest

from graphrag.core.errors import ConfigurationError
from worker.broker import broker_conf, is_amqp
from worker.settings import load_settings


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
    ("amqp//guest@host/", "the broker must be Redis or RabbitMQ"),
    ("kafka://host:9092", "not 'kafka'"),
    ("amqp://guest:secret@:5672/", "bad host or port ':5672'"),
    ("redis://host:port/0", "bad host or port 'host:port'"),
])
def test_a_malformed_broker_url_names_the_variable_and_hides_the_password(url: str, words: str) -> None:
    with pytest.raises(ConfigurationError, match="BROKER_URL") as caught:
        load_settings(broker_url=url)
    assert words in str(caught.value) and "secret" not in str(caught.value)
    assert "Value error" not in str(caught.value)
