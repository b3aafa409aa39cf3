"""What the subtasks of one worker share in one generation, and what they ask of it.

`TaskContext` is a value: the plan, the generation, the shared producer and
checkpoint storage, the run's settings. `WorkerPorts` is what a subtask calls
back into its worker for; the worker (`kstream.runtime.worker.process.Worker`)
implements it, and a test that opens a subtask alone passes its own.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import KafkaError, Message

from kstream.dataflow.outputs import Guarantee
from kstream.dataflow.plan import Plan
from kstream.protocol.barrier import Alignment
from kstream.protocol.flow import FlowConfig
from kstream.protocol.input import HOLD_BYTES
from kstream.protocol.limits import DEFAULT_PRODUCER_BYTES
from kstream.protocol.messages import ControlMessage
from kstream.protocol.snapshot_id import LamportClock
from kstream.runtime.checkpoint.storage import CheckpointStorage
from kstream.runtime.checkpoint.storing import Storing
from kstream.runtime.worker.faults import Faults

__all__ = ["BATCH", "MAX_POLL_GAP_MS", "TRIGGERED_BATCH", "TaskContext", "WorkerPorts"]

#: Records fetched per `consume` call: large batches amortise the Python call overhead.
BATCH = 1000
#: A source with a trigger waiting reads at most this many records before its
#: snapshot: those fetched already join this checkpoint, but a full batch's
#: work (a backlog's) would hold every barrier of the checkpoint back.
TRIGGERED_BATCH = 100
#: A gap between two polls of a source counts at most this much towards idleness
#: (ms): more than a poll's wait, far less than any sensible idle timeout.
MAX_POLL_GAP_MS = 100


class WorkerPorts(Protocol):
    """What a subtask asks of the worker running it."""

    def send_control(self, message: ControlMessage) -> None:
        """Write `message` to the job's control topic (a decline, an `Initiated`)."""

    def pump(self) -> None:
        """Serve pending complete/abort control messages now, from inside a sink's
        wait (see `SinkContext.pump`); raises `RollbackInterrupt` on a rollback."""

    def raise_if_undelivered(self) -> None:
        """Raise `RecordLostError` if the shared producer lost a record (see `SinkContext`)."""

    def delivery_failed(self, err: KafkaError, msg: Message) -> None:
        """The shared producer lost `msg`: a record produced with a delivery
        callback of its own (a channel record) hands its failure on here, so
        that `raise_if_undelivered` sees it."""

    def announce(self, checkpoint: int) -> None:
        """A source subtask of this worker started `checkpoint`: tell the worker's
        other subtasks at once (`Subtask.announced`), before its `Initiated` comes
        back through the control topic: a sibling source polled next would
        otherwise start one too."""


@dataclass(frozen=True)
class TaskContext:
    """What every subtask of one worker shares in one generation."""

    bootstrap: str
    plan: Plan
    generation: int
    producer: Any  # confluent_kafka.Producer (shared, idempotent)
    storage: CheckpointStorage
    state_root: Path
    executor: Executor
    ports: WorkerPorts
    #: What `executor` is storing (`kstream.runtime.checkpoint.storing`), for the heartbeat.
    storing: Storing = field(default_factory=Storing)
    faults: Faults = field(default_factory=Faults)
    guarantee: Guarantee = "exactly-once"
    transaction_timeout_ms: int = 600_000
    #: The shared producer's ``message.max.bytes``: no record it writes (channel
    #: record, plain sink output, dead letter) may be larger (`kstream.protocol.limits`).
    max_record_bytes: int = DEFAULT_PRODUCER_BYTES
    #: `JobIdentity.fingerprint` of the job, recorded in every snapshot.
    identity: str = ""
    #: Flow control: how much the channels a subtask writes may hold
    #: (`kstream.runtime.channels.flow`).
    flow: FlowConfig = field(default_factory=FlowConfig)
    #: How a subtask with several input channels snapshots (`kstream.protocol.barrier`).
    alignment: Alignment = Alignment.ALIGNED
    #: Seconds an alignment may last before it switches to unaligned (None: never).
    alignment_timeout_s: float | None = None
    #: Bytes an aligning subtask may hold of its blocked channels' records
    #: (`kstream.protocol.input.InputProcessor`; 0: pause them at once).
    alignment_hold_bytes: int = HOLD_BYTES
    #: The worker's snapshot clock: the largest checkpoint id it has seen.
    clock: LamportClock = field(default_factory=LamportClock)
    #: Seconds between the snapshots each source subtask starts itself, for every
    #: source (``--source-snapshot-interval``; None: each source's `snapshot_every_ms`).
    source_snapshot_every: float | None = None
    #: Concurrent snapshots (unaligned; `--concurrent`): up to this many in flight,
    #: taken in any id order where no sink needs id order (0: off).
    concurrent: int = 0
