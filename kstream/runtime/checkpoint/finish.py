"""The asynchronous part of a subtask's snapshot: the durable copy, then the ack.

`finish` hands a `Taken` snapshot to the executor and returns at once; the
worker acks the `PendingAck` once its future is done, or declines the
checkpoint if it failed. A failure never reaches the processing thread as an
exception: processing goes on from the state in memory, the last completed
checkpoint stays the restore point, and the next checkpoint tries the storage
again.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Executor, Future
from dataclasses import dataclass

from kstream.runtime.checkpoint.storage import CheckpointStorage, SnapshotMeta
from kstream.runtime.checkpoint.storing import Storing
from kstream.runtime.checkpoint.take import Taken

__all__ = ["PendingAck", "finish", "store_taken"]


@dataclass(frozen=True)
class PendingAck:
    """A snapshot whose durable copy is being written; ack once `future` is done.

    The future gives the stored meta (with the state's size, known only then).
    """

    meta: SnapshotMeta
    future: Future[SnapshotMeta]
    task: str
    #: Taken by the unaligned rule (`Acked.unaligned`), holding `in_flight` channel records.
    unaligned: bool = False
    in_flight: int = 0
    #: How the subtask joined the snapshot (`Acked.cut_on`).
    cut_on: str = ""


def finish(
    storage: CheckpointStorage,
    executor: Executor,
    taken: Taken,
    *,
    unaligned: bool = False,
    in_flight: int = 0,
    storing: Storing | None = None,
) -> PendingAck:
    """Write the durable copy of `taken` on `executor`; the worker acks once it is done.

    `executor` must be the one the state's checkpoint was submitted to, with a
    single thread: the copy then runs after it (first in, first out). `storing`
    is told from the hand-over to the end (the worker's heartbeat reports a slow one).
    """
    queued = None if storing is None else storing.queued(taken.meta.checkpoint, taken.meta.task)
    try:
        future = executor.submit(store_taken, storage, taken)
    except BaseException:
        if storing is not None and queued is not None:
            storing.done(queued)
        raise
    if storing is not None and queued is not None:
        future.add_done_callback(lambda _: storing.done(queued))
    return PendingAck(taken.meta, future, taken.meta.task, unaligned, in_flight, taken.cut_on)


def store_taken(storage: CheckpointStorage, taken: Taken) -> SnapshotMeta:
    """The sinks' finishing work, then the copy; the meta stored.

    Runs on the executor after the state's checkpoint (submitted before it), so
    `taken.state` is done: its failure fails the snapshot, with its own cause.
    """
    meta = taken.meta
    if taken.state is not None:
        meta = dataclasses.replace(meta, size=taken.state.result())
    for run in taken.finishers:
        run()
    storage.store(meta, taken.staged, taken.payloads)
    return meta
