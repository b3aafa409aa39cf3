"""The fault campaign's input producer outlives a stuck client (real broker).

Long campaigns met an idempotent producer that, after a broker bounce amid
kills and pauses, kept its records queued for good with no connection at all,
while fresh clients worked. That bounce is not reproducible on demand; here
the feeder's producer is swapped for one whose bootstrap address has no broker
behind it, which from the feeder's side looks the same: records handed over,
never acknowledged, while the cluster answers everyone else.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.runtime.kafka import IDEMPOTENT
from kstream.tools.chaos.feeder import InputFeeder
from kstream.tools.chaos.reader import read_input

pytestmark = pytest.mark.broker

#: Values per round of the test; a whole round is due at once (high rate).
ROUND = 50


def feed_until_done(feeder: InputFeeder, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not feeder.done:
        assert time.monotonic() < deadline, f"{feeder.pending} deliveries still pending"
        feeder.feed()
        time.sleep(0.05)  # a campaign round's pace, not a synchronisation


def test_a_stuck_input_producer_is_replaced_and_every_value_arrives(
    bootstrap: str, topic: str
) -> None:
    Admin(bootstrap).create_topics({topic: 2})
    values = [f"line {i}".encode() for i in range(2 * ROUND)]
    # Long enough for a fresh idempotent producer's first delivery on a loaded machine.
    feeder = InputFeeder(bootstrap, topic, values, 2, rate=1e6, stall_s=5.0)
    # A producer with no broker behind it: what the stuck one looked like.
    feeder._producer = Producer(
        client_config("127.0.0.1:1", {**IDEMPOTENT, "reconnect.backoff.max.ms": 1000})
    )
    feed_until_done(feeder, 120)
    assert feeder.replacements == 1
    # Every value arrived once (the stuck producer never delivered), partition by
    # partition in the order written.
    assert read_input(bootstrap, topic) == values[0::2] + values[1::2]
    feeder.close()


def test_a_producer_waiting_for_a_broker_that_answers_nobody_is_left_alone(
    bootstrap: str, topic: str
) -> None:
    Admin(bootstrap).create_topics({topic: 1})
    values = [f"line {i}".encode() for i in range(ROUND)]
    # The whole cluster is unreachable: the probe finds no leader, so no replacement
    # (a replacement would only add a second client waiting for the same broker).
    feeder = InputFeeder("127.0.0.1:1", topic, values, 1, rate=1e6, stall_s=0.5)
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        feeder.feed()
        time.sleep(0.05)
    assert feeder.replacements == 0
    assert feeder.pending == ROUND
