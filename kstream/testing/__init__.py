"""Testing tools shipped with kstream.

Two sets, for two kinds of test:

* ``kstream.testing.harness`` runs a job in this process without a broker, its
  sources fed from lists and its sinks collected in memory: `run_job`,
  `TestRun`, `Record`. Unit tests of a job's logic.
* ``kstream.testing.kafka`` verifies jobs against a real cluster (unique topics,
  producing, reading back): nothing there fakes Kafka. kstream's own suite
  uses it as well.
* ``kstream.testing.text`` and ``kstream.testing.ports``: word-count input
  (`skewed_lines`) and free ports for a test's own servers (`free_ports`).
"""

from __future__ import annotations

from kstream.testing.harness import Record, TestRun, run_job
from kstream.testing.kafka import (
    BACKLOG_READER,
    FEED_TIMEOUT_S,
    READ_TIMEOUT_S,
    Feeder,
    ReadRecord,
    RecordingSink,
    in_flight_at,
    produce,
    read_all,
    run_until_consumed,
    unique_name,
    wait_settled,
)
from kstream.testing.ports import free_ports
from kstream.testing.text import skewed_lines

__all__ = [
    "BACKLOG_READER",
    "FEED_TIMEOUT_S",
    "READ_TIMEOUT_S",
    "Feeder",
    "ReadRecord",
    "Record",
    "RecordingSink",
    "TestRun",
    "free_ports",
    "in_flight_at",
    "produce",
    "read_all",
    "run_job",
    "run_until_consumed",
    "skewed_lines",
    "unique_name",
    "wait_settled",
]
