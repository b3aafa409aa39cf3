"""A control reader waiting for messages returns as soon as one is there (real broker).

librdkafka's batch consume waits out its whole timeout unless its batch fills;
the coordinator's loop waited that way for every ack. `ControlReader.poll`
returns what is queued, or the first message that arrives within its timeout
and what came with it.
"""

from __future__ import annotations

import threading
import time

import pytest

from kstream.infra.admin import Admin
from kstream.protocol.messages import Aborted
from kstream.protocol.names import control_topic
from kstream.runtime.control import ControlReader, ControlWriter
from kstream.testing import unique_name

pytestmark = pytest.mark.broker

#: Far longer than any message takes to arrive: a reader that waits it out fails.
LONG_WAIT_S = 60.0


def test_a_waiting_control_reader_returns_with_the_first_message(bootstrap: str) -> None:
    job = unique_name("reader-wait")
    Admin(bootstrap).create_topics({control_topic(job): 1})
    writer = ControlWriter(bootstrap, job)
    reader = ControlReader(bootstrap, job, unique_name("group"))
    try:
        # Nothing yet: an empty answer (after a short wait).
        assert reader.poll(0.2) == []

        def send() -> None:
            writer.send(Aborted(7, 1, "first"))
            writer.send(Aborted(8, 1, "second"))

        # Sent while the reader waits (it is blocked in librdkafka, the GIL released),
        # so its wait must end on their arrival.
        sending = threading.Thread(target=send, daemon=True)
        sending.start()
        started = time.monotonic()
        got = []
        while len(got) < 2 and time.monotonic() - started < LONG_WAIT_S:
            got += [m.checkpoint for _, m in reader.poll(LONG_WAIT_S) if isinstance(m, Aborted)]
        waited = time.monotonic() - started
        sending.join()
        assert got == [7, 8]
        # Well before one full wait: each poll returned once a message was there.
        assert waited < LONG_WAIT_S / 2
    finally:
        reader.close()
