"""A cleanly stopping worker reads the control topic to its *settled* end (real broker).

The coordinator's commit returns once it is decided and the broker writes the
commit marker just after; until then a read_committed reader's end stops before
the message. A worker stopped right after a checkpoint completed read to that
end, missed the completion, and left the checkpoint's output uncommitted until
the next run (a test saw a finished job's output topic empty).
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from confluent_kafka import Producer

from kstream.infra.admin import Admin
from kstream.protocol.messages import Aborted, ControlMessage
from kstream.protocol.names import control_topic
from kstream.runtime.control import ControlReader, ControlWriter
from kstream.runtime.kafka import client_config
from kstream.testing import unique_name

pytestmark = pytest.mark.broker

#: How long the transaction below stays open while the reader reads to the end.
OPEN_FOR_S = 1.0


def _open_transaction(bootstrap: str, prefix: str, reason: str) -> tuple[str, Producer]:
    """A job's control topic holding a committed message ("before") and, after it,
    an open transaction holding one with `reason`: the job's name and that
    transaction's producer."""
    job = unique_name(prefix)
    topic = control_topic(job)
    Admin(bootstrap).create_topics({topic: 1})
    ControlWriter(bootstrap, job).send(Aborted(1, 1, "before"))
    producer = Producer(client_config(bootstrap, {"transactional.id": unique_name(prefix)}))
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, json.dumps(Aborted(2, 1, reason).to_dict()).encode(), partition=0)
    producer.flush(30)
    return job, producer


def test_a_message_committed_while_the_reader_settles_is_read(bootstrap: str) -> None:
    job, producer = _open_transaction(bootstrap, "settle", "late")
    # The commit lands while the reader waits: the marker written late, as under load.
    committer = threading.Timer(OPEN_FOR_S, lambda: producer.commit_transaction(30))
    reader = ControlReader(bootstrap, job, unique_name("group"))
    try:
        committer.start()
        got = [m.reason for _, m in reader.read_to_end(settle=30.0) if isinstance(m, Aborted)]
    finally:
        committer.join()
        reader.close()
    assert got == ["before", "late"]


def test_without_settling_the_open_transaction_is_not_waited_for(bootstrap: str) -> None:
    job, producer = _open_transaction(bootstrap, "unsettled", "never")
    reader = ControlReader(bootstrap, job, unique_name("group"))
    try:
        messages: list[ControlMessage] = [m for _, m in reader.read_to_end()]
        # A transaction that never ends holds a settling read back only for its `settle`.
        started = time.monotonic()
        settled = [m for _, m in reader.read_to_end(settle=1.5)]
        waited = time.monotonic() - started
    finally:
        producer.abort_transaction(30)
        reader.close()
    assert [m.reason for m in messages if isinstance(m, Aborted)] == ["before"]
    assert settled == []  # read already; nothing past the open transaction
    assert waited >= 1.5


@pytest.mark.parametrize("polled_first", [False, True])
def test_a_reader_placed_at_the_end_reads_to_it_when_nothing_new_arrived(
    bootstrap: str, polled_first: bool
) -> None:
    # A starting runner waits for its predecessor's heartbeat with a reader placed
    # at the end, then reads up to the end; the predecessor killed, nothing new
    # arrived, and that read waited out its whole timeout and failed the start.
    job = unique_name("at-end")
    Admin(bootstrap).create_topics({control_topic(job): 1})
    ControlWriter(bootstrap, job).send(Aborted(1, 1, "before"))
    reader = ControlReader.at_end(bootstrap, job, unique_name("group"))
    try:
        if polled_first:
            assert reader.poll(0.5) == []
        got = list(reader.read_to_end(timeout=10.0, settle=1.0))
        ControlWriter(bootstrap, job).send(Aborted(2, 1, "after"))
        after = [m.reason for _, m in reader.read_to_end(timeout=10.0) if isinstance(m, Aborted)]
    finally:
        reader.close()
    assert got == []
    assert after == ["after"]
