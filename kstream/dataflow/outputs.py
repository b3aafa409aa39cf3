"""The sink contract users implement: `Sink` names a destination and opens a `SinkWriter`
per subtask, which takes part in checkpoints by two-phase commit.

The runtime drives one `SinkWriter` per sink per subtask. Each checkpoint
epoch n covers the records written between the previous barrier and barrier n.
Checkpoint ids grow but are not consecutive (Lamport clocks,
`kstream.protocol.snapshot_id`): "n-1" below is the previous checkpoint this
subtask took, and `begin_epoch` gets a label above it (its id + 1), not the id
of the checkpoint that will seal the epoch; `pre_commit` names that one.

=================== ================================================= ==============
call                when                                              idempotent?
=================== ================================================= ==============
`begin_epoch(n)`    before the first `write` of epoch n: at start-up   no
                    and right after `pre_commit(n-1)`
`write(value)`      for every result, in order; raises                no
                    `RecordTooLargeError`, before writing anything,
                    for a result too large for the destination
`pre_commit(n)`     barrier n reached this subtask, after its state   no
                    snapshot and before its ack; must make epoch n
                    durable-but-invisible (or, without transactions,
                    just durable), by itself or in the returned
                    snapshot's `finish`, which runs before the ack.
                    Returns what the snapshot must keep.
`commit(n)`         the coordinator declared checkpoint n complete:   yes
                    publish every pre-committed epoch <= n
`abort(n)`          checkpoint n failed (timed out or declined) and   yes
                    the job goes on: epoch n stays pending and is
                    committed with the next completed checkpoint
                    (its effects are in the state already). Epochs
                    after a restored checkpoint are discarded by
                    `recover` instead.
`recover(n, kept)`  before anything else after a restore from         yes
                    checkpoint n, with what `pre_commit(n)` returned
`close()`           the subtask stops (no commit implied)             yes
=================== ================================================= ==============

`commit` may be called for an epoch long after later epochs began, and after a
crash `recover` must make the outcome of epoch n exactly as if `commit(n)`
had run once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol

from typing_extensions import TypeVar

from kstream.errors import RecordError
from kstream.protocol.limits import DEFAULT_PRODUCER_BYTES

__all__ = [
    "GUARANTEES",
    "Guarantee",
    "Producer",
    "RollbackInterrupt",
    "Sink",
    "SinkContext",
    "SinkSnapshot",
    "SinkWriter",
]


class Producer(Protocol):
    """The calls a sink makes on the worker's shared producer (`SinkContext.producer`):
    a `confluent_kafka.Producer` in a job, any object with these methods in a test."""

    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None: ...

    def poll(self, timeout: float = -1) -> int: ...

    def flush(self, timeout: float = -1) -> int: ...

    def __len__(self) -> int: ...


Guarantee = Literal["exactly-once", "at-least-once", "at-most-once"]
GUARANTEES: tuple[Guarantee, ...] = ("exactly-once", "at-least-once", "at-most-once")


def _raise_refused(value: Any, exc: RecordError) -> None:
    raise exc


class RollbackInterrupt(BaseException):
    """Raised out of `SinkContext.pump` when the job rolls back during the wait.

    The subtask waiting inside a sink is about to be replaced, so the record being
    processed must not be finished. It derives from `BaseException`, like
    `GeneratorExit`, so that neither user code nor the runtime's error policy
    (which catch `Exception` around user functions) can mistake it for a failure
    of the record and dead-letter an innocent one; the worker's loop catches it.
    """


@dataclass(frozen=True, slots=True)
class SinkSnapshot:
    """What a sink keeps in a checkpoint: small JSON-able `meta` and a bulky `payload`.

    The payload (e.g. the write-ahead records of epochs not yet committed) is
    serialized off the processing thread by the checkpoint storage with
    `marshal`, so it must be built of bytes, str, int, float, bool, None,
    tuples, lists and dicts.
    """

    meta: dict[str, Any] = field(default_factory=dict)
    payload: Any = None
    #: Work that must succeed before the snapshot counts, run on the upload
    #: thread before it is stored (e.g. waiting until a sealed transaction's
    #: records are acknowledged). Raising declines the checkpoint.
    finish: Callable[[], None] | None = None


@dataclass(frozen=True, slots=True)
class SinkContext:
    """What a sink needs to open its writer in one subtask."""

    bootstrap: str
    job: str
    task: str
    generation: int
    #: The worker's shared idempotent producer (for sinks without transactions).
    producer: Producer
    guarantee: Guarantee = "exactly-once"
    #: Partition of the job's commit-marker topic owned by this sink subtask.
    marker_partition: int = 0
    #: ``transaction.timeout.ms`` for transactional producers.
    transaction_timeout_ms: int = 600_000
    #: Serve pending `complete`/`abort` control messages now (a sink waiting
    #: for a commit to free a transactional producer calls this). Raises
    #: `kstream.dataflow.outputs.RollbackInterrupt` if a rollback arrives
    #: meanwhile: let it propagate.
    pump: Callable[[], None] = lambda: None
    #: Raises `RecordLostError` if the shared `producer` failed to deliver
    #: a record (its delivery errors are collected producer-wide).
    raise_if_undelivered: Callable[[], None] = lambda: None
    #: (topic, partition, offset) of the source record being processed, for
    #: lineage headers; None when the sink is not in a source's stage.
    source_position: Callable[[], tuple[str, int, int] | None] | None = None
    #: The event time (ms) of the result being written, on a stage with event
    #: time (None otherwise): a sink may use it as the output's timestamp.
    event_time: Callable[[], int | None] | None = None
    #: ``message.max.bytes`` of the shared `producer`: a larger output record
    #: written through it is a `RecordTooLargeError` (see `kstream.protocol.limits`).
    max_record_bytes: int = DEFAULT_PRODUCER_BYTES
    #: Hand result `value`, which the destination refused (a row violating a
    #: constraint of its table, say), to the job's error policy with `exc`, a
    #: `RecordError` whose message says why in one line: the result is
    #: dead-lettered (its ``repr``, no source position: a refusal is found when a
    #: batch is written, after many inputs) or skipped, and the writer leaves it
    #: out and goes on with the others; under ``on_error="fail"`` it raises
    #: `JobFailedError`. Default (no error policy at hand): raise `exc`.
    refused: Callable[[Any, RecordError], None] = _raise_refused


class SinkWriter(ABC):
    """The per-subtask writer of a sink. See the module docstring for the protocol."""

    #: Values handed to `write` so far, if the writer counts them itself (it
    #: sets 0, then adds 1 at the start of every `write`, before anything that
    #: may raise); None: the runtime counts them, with one more call per value.
    handed: int | None = None

    @abstractmethod
    def write(self, value: Any) -> None: ...

    def begin_epoch(self, epoch: int) -> None:  # noqa: B027 - optional hook
        """Epoch `epoch` starts."""

    @abstractmethod
    def pre_commit(self, epoch: int) -> SinkSnapshot:
        """Make epoch `epoch` durable; return what the snapshot must hold for it."""

    def commit(self, epoch: int) -> None:  # noqa: B027 - optional hook
        """Publish every pre-committed epoch up to `epoch` (checkpoint complete)."""

    def abort(self, epoch: int) -> None:  # noqa: B027 - optional hook
        """Checkpoint `epoch` failed; keep its epoch for the next completed checkpoint."""

    def recover(self, epoch: int | None, kept: SinkSnapshot | None) -> None:  # noqa: B027
        """Restore after a rollback to checkpoint `epoch` (None: fresh start)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; nothing is committed."""


#: What a sink takes: contravariant, so a ``Sink[object]`` takes a ``Stream[int]``.
T_contra = TypeVar("T_contra", contravariant=True, default=Any)


class Sink(ABC, Generic[T_contra]):
    """Where results go: a description from which the runtime opens one writer per subtask.

    Its type parameter is what it takes (``Stream[T].sink`` needs a ``Sink[T]``);
    a bare `Sink` is ``Sink[Any]``, as `KafkaSink` is by default.

    ================= ========================================================
    member            read or called
    ================= ========================================================
    `name`            when the job graph is built (`Stream.sink`) and when the
                      job's identity is fingerprinted; with the sink's
                      position, it names the writer's state in checkpoints, so
                      it must not change between runs that resume each other
    `lineage`         by the runner once per run, before any worker starts:
                      True is refused unless the sink is in its source's stage
    `commit_markers`  by the runner before it resumes a checkpoint: True
                      makes it check that the job's commit-marker topic still
                      holds the markers the sink's kept epochs are confirmed by
    `check`           by the runner once per run, before any worker starts and
                      after `lineage` is accepted; raising refuses the run
    `topics`          by every worker once when it starts, to size the record
                      limit of its shared producer
    `open`            in a worker, once per sink subtask per generation (a
                      recovery opens new writers after closing the old ones),
                      never before `check` succeeded in the runner; never
                      called again on the writer's behalf after its `close`
    ================= ========================================================

    The writer `open` returns follows the checkpoint protocol of
    `kstream.dataflow.outputs.SinkWriter`: `recover` first, then epochs of
    `write`/`pre_commit`, `commit` or `abort`, and no call after `close`.
    Implemented by `kstream.connectors.kafka.KafkaSink`.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """A label for logs and checkpoints; stable across runs."""

    @property
    def lineage(self) -> bool:
        """Whether outputs carry the position of the source record behind them.

        Positions do not cross channels, so the runner refuses a sink that asks
        for them outside its source's stage. Default: False.
        """
        return False

    @property
    def commit_markers(self) -> bool:
        """Whether a recovery tells the writer's published epochs from its unpublished
        ones by the commit markers it wrote in the job's commit-marker topic.

        True for a sink whose kept epochs (the snapshot meta's ``pending``, epoch
        numbers, with ``marker``: [partition, offset] of the newest marker known
        committed) are re-published after the newest committed marker, as the
        Kafka transactional sink's are: before resuming, the runner refuses a
        checkpoint whose markers that topic lost (deleted, or cut by retention),
        since the epochs would be published again
        (`kstream.protocol.resume_check.marker_need`). False (the default) for a
        sink that confirms its epochs in the destination itself (a table's own
        commit, a prepared transaction): its snapshots read nothing of that
        topic, whatever they keep.
        """
        return False

    def check(self, bootstrap: str) -> None:
        """Raise `ConfigurationError` if the destination cannot be written (default: none).

        Called in the runner, so a missing destination refuses the run before any
        worker starts instead of failing every subtask.
        """

    def topics(self) -> tuple[str, ...]:
        """Kafka topics the writer may produce to through `SinkContext.producer` (default: none).

        The worker limits its shared producer's records to the smallest record
        limit of these topics (with its channels' and dead letters'), so that a
        too-large output is refused before it is produced.
        """
        return ()

    @abstractmethod
    def open(self, ctx: SinkContext) -> SinkWriter:
        """A new writer for one subtask, as `ctx` describes it.

        Raises `ConfigurationError` for a sink that cannot be written from that
        subtask (it fails the worker, and the run); must not produce anything yet:
        the writer's `recover` comes first.
        """
