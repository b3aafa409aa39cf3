"""The Kafka sink writers' fixed settings: pool size, timeouts, batching, marker reads.

Numbers only, each with why it has its value; the writers
(`kstream.connectors.kafka.plain`, `kstream.connectors.kafka.transactional`)
import them by name.
"""

from __future__ import annotations

__all__ = [
    "CLOSE_TIMEOUT_S",
    "FLUSH_TIMEOUT_S",
    "HELD_CHECK_EVERY",
    "MARKER_POLL_S",
    "MARKER_WINDOW",
    "POOL_SIZE",
    "SINK_LINGER_MS",
    "WARN_FRACTION",
]

#: Transactional producers per sink subtask: one epoch may wait for its commit
#: while the next is written, with one spare for a checkpoint completing late.
POOL_SIZE = 3
#: Bound on aborting open transactions when a subtask closes.
CLOSE_TIMEOUT_S = 10.0
#: Commit markers read at once when a recovery looks for the newest committed one
#: (then 4x as many further back, until one is found).
MARKER_WINDOW = 256
#: How long one read of the marker partition may wait. A batch read returns only
#: when full or at its timeout (the partition's end does not cut it short), and a
#: recovery waits for this read (a one-second wait cost every recovery a second).
MARKER_POLL_S = 0.05
#: Warn when a pending transaction has used this share of its timeout.
WARN_FRACTION = 0.5

#: How long a flush at a checkpoint may take before the checkpoint is declined.
FLUSH_TIMEOUT_S = 60.0
#: How long an exactly-once sink's producer gathers records before sending a
#: batch. Its records become visible only when their transaction commits (once
#: per checkpoint), and the checkpoint's flush sends what is left at once, so
#: waiting longer than `BATCHING`'s 5 ms delays no output; it makes fewer,
#: larger produce requests, which cost the broker and the producer CPU per request.
SINK_LINGER_MS = 50
#: While an epoch's records are held back (see `TransactionalWriter`), whether the
#: previous epoch is delivered is asked once per this many records: asking costs
#: about as much as processing a record.
HELD_CHECK_EVERY = 64
