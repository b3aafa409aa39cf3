"""Kafka's errors become kstream's, by what the caller can do about them (no broker)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from kstream.errors import (
    KafkaUnavailableError,
    KStreamError,
    ProducerFencedError,
    RecordLostError,
)
from kstream.runtime.kafka import BATCHING, IDEMPOTENT, client_config, kafka_error


@pytest.mark.parametrize(
    "code", [KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH]
)
def test_fenced_is_its_own_error(code: int) -> None:
    error = kafka_error(KafkaException(KafkaError(code)), "commit")
    assert type(error) is ProducerFencedError
    assert str(error).startswith("commit: ")


def test_a_transaction_that_must_abort_lost_a_record() -> None:
    err = KafkaError(KafkaError._MSG_TIMED_OUT, txn_requires_abort=True)
    assert type(kafka_error(err, "commit")) is RecordLostError


@pytest.mark.parametrize(
    "code", [KafkaError._TRANSPORT, KafkaError._TIMED_OUT, KafkaError._UNKNOWN_PARTITION]
)
def test_anything_else_means_retry_later(code: int) -> None:
    error = kafka_error(KafkaException(KafkaError(code)), "write")
    assert type(error) is KafkaUnavailableError


def test_a_non_kafka_argument_still_becomes_kstreams_error() -> None:
    error = kafka_error(KafkaException("odd"), "read")
    assert isinstance(error, KStreamError)
    assert str(error) == "read: odd"


def test_the_three_kafka_errors_are_distinct() -> None:
    for a in (KafkaUnavailableError, ProducerFencedError, RecordLostError):
        for b in (KafkaUnavailableError, ProducerFencedError, RecordLostError):
            assert issubclass(a, b) == (a is b)


def test_layers_merge_in_order_on_a_quiet_base() -> None:
    config = client_config("h:1", IDEMPOTENT, BATCHING, {"linger.ms": 0})
    assert config["bootstrap.servers"] == "h:1"
    assert config["log_level"] == 0
    assert config["enable.idempotence"] is True
    assert config["linger.ms"] == 0  # the later layer wins
    assert config["batch.size"] == BATCHING["batch.size"]
