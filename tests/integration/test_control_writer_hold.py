"""Held control messages share one transaction (real broker).

The coordinator's writer is transactional. Messages sent with ``hold=True``
stay in the open transaction: a read_committed reader sees none of them until
the next message sent without `hold`, or `release`, commits them all, in the
order sent.
"""

from __future__ import annotations

import pytest

from kstream.infra.admin import Admin
from kstream.protocol.messages import Aborted
from kstream.protocol.names import control_topic, coordinator_transactional_id
from kstream.runtime.control import ControlWriter, read_messages
from kstream.testing import unique_name

pytestmark = pytest.mark.broker


def _checkpoints(bootstrap: str, job: str) -> list[int]:
    return [m.checkpoint for m in read_messages(bootstrap, job) if isinstance(m, Aborted)]


def test_held_messages_are_committed_together_in_order(bootstrap: str) -> None:
    job = unique_name("writer-hold")
    Admin(bootstrap).create_topics({control_topic(job): 1})
    writer = ControlWriter(bootstrap, job, coordinator_transactional_id(job))
    writer.send(Aborted(1, 1, "alone"))
    writer.send(Aborted(2, 1, "held"), hold=True)
    writer.send(Aborted(3, 1, "held"), hold=True)
    # Held: not committed, so not read.
    assert _checkpoints(bootstrap, job) == [1]
    # A message sent without hold commits the held ones with it, in order.
    writer.send(Aborted(4, 1, "commits"))
    assert _checkpoints(bootstrap, job) == [1, 2, 3, 4]
    writer.send(Aborted(5, 1, "held"), hold=True)
    assert _checkpoints(bootstrap, job) == [1, 2, 3, 4]
    writer.release()
    assert _checkpoints(bootstrap, job) == [1, 2, 3, 4, 5]
    writer.release()  # nothing held: nothing happens
    assert _checkpoints(bootstrap, job) == [1, 2, 3, 4, 5]
