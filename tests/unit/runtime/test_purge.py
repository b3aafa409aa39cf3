"""The channel purger's rounds: off the caller's thread, one at a time, one client.

The deletes themselves run against a real broker in
`tests/e2e/test_bounded_topics.py`; here the admin client is a stand-in that
blocks or fails on demand, to pin down when rounds start.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import pytest
from confluent_kafka import TopicPartition

import kstream.runtime.runner.purge as purge_module
from kstream.runtime.runner.purge import PURGE_PERIOD_S, ChannelPurger


class _Admin:
    """Records each round's partitions; blocks until `release` is set, or raises.

    The fixture gives each test a subclass with its own counters and events.
    """

    made: ClassVar[int]
    rounds: ClassVar[list[list[tuple[str, int, int]]]]
    release: ClassVar[threading.Event]
    started: ClassVar[threading.Event]
    fail: ClassVar[bool]

    def __init__(self, bootstrap: str) -> None:
        type(self).made += 1

    def delete_records_before(self, tps: list[TopicPartition]) -> None:
        type(self).started.set()
        type(self).release.wait(30)
        type(self).rounds.append([(tp.topic, tp.partition, tp.offset) for tp in tps])
        if type(self).fail:
            raise RuntimeError("broker said no")


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> Any:
    class Fresh(_Admin):
        made: ClassVar[int] = 0
        rounds: ClassVar[list[list[tuple[str, int, int]]]] = []
        release: ClassVar[threading.Event] = threading.Event()
        started: ClassVar[threading.Event] = threading.Event()
        fail: ClassVar[bool] = False

    monkeypatch.setattr(purge_module, "Admin", Fresh)
    return Fresh


def test_a_round_runs_off_the_callers_thread_and_the_next_waits_for_it(admin: Any) -> None:
    purger = ChannelPurger("unused:9092")
    purger.completed(5, {"ch": {0: 10, 1: 0}})
    purger.maybe_purge(PURGE_PERIOD_S + 1)
    # The round is blocked inside the delete, yet maybe_purge has returned.
    assert admin.started.wait(10)
    assert admin.rounds == []
    purger.completed(6, {"ch": {0: 20, 1: 4}})
    purger.discarded(5)
    # A period later, but the round still runs: no second one.
    purger.maybe_purge(2 * PURGE_PERIOD_S + 2)
    admin.release.set()
    purger.close()
    assert admin.rounds == [[("ch", 0, 10)]]


def test_rounds_share_one_client_until_one_fails(
    admin: Any, caplog: pytest.LogCaptureFixture
) -> None:
    admin.release.set()
    purger = ChannelPurger("unused:9092")
    purger.completed(5, {"ch": {0: 10}})
    purger.purge()
    purger.purge()
    assert admin.made == 1
    admin.fail = True
    purger.purge()  # logged, not raised
    assert "purge failed (will retry)" in caplog.text
    admin.fail = False
    purger.purge()
    purger.close()
    assert admin.made == 2
    assert len(admin.rounds) == 4


def test_nothing_to_purge_starts_no_round(admin: Any) -> None:
    purger = ChannelPurger("unused:9092")
    purger.completed(5, {"ch": {0: 0}})
    purger.maybe_purge(PURGE_PERIOD_S + 1)
    purger.close()
    assert admin.made == 0
