"""The synchronous part of a subtask's snapshot, taken between two records.

`take_snapshot` moves the state's cached changes towards RocksDB and starts
its checkpoint on the executor (`StateStore.checkpoint_later`), pre-commits
the sinks, sends the barriers downstream and starts the sinks' next epoch;
what it returns (`Taken`) is stored later, off the processing thread
(`kstream.runtime.checkpoint.finish`), or held until its channel state is
recorded (`kstream.runtime.checkpoint.held`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kstream.dataflow.outputs import SinkWriter
from kstream.runtime.checkpoint.storage import SnapshotMeta
from kstream.runtime.state.store import StateStore

__all__ = ["BarrierWriter", "FaultPoints", "Subject", "Taken", "take_snapshot"]


class BarrierWriter(Protocol):
    """A writer of a channel downstream (`ChannelWriter`): a snapshot sends its barrier."""

    def barrier(self, checkpoint: int) -> None: ...


class FaultPoints(Protocol):
    """Where tests inject faults (`kstream.runtime.worker.faults.Faults`)."""

    def hit(self, point: str, checkpoint: int) -> None: ...


@dataclass(frozen=True)
class Subject:
    """What a subtask's snapshots are taken of: fixed once its chain is compiled."""

    task: str
    generation: int
    #: `JobIdentity.fingerprint` of the job.
    identity: str
    #: The subtask's keyed state (None: its stage keeps none).
    state: StateStore | None
    #: `StateSerde.name` of the state's encoding.
    state_serde: str
    key_format: int
    #: The job's key groups (0: key format 1 or 2, which has none).
    max_parallelism: int
    #: The parallelism of the subtask's stage.
    parallelism: int
    #: Where staged RocksDB checkpoints go until they are stored.
    staging: Path
    #: The single thread that creates and stores snapshots, in order.
    executor: Executor
    #: The sinks' writers by name, and the channel writers, in the chain's order.
    sinks: Mapping[str, SinkWriter]
    writers: Sequence[BarrierWriter]
    faults: FaultPoints
    #: What a snapshot keeps of the subtask's watermarks (`SnapshotMeta.watermarks`).
    watermarks: Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class Taken:
    """A snapshot taken but not yet stored: its meta, staged state and sinks' parts."""

    meta: SnapshotMeta
    staged: Path | None
    #: The RocksDB checkpoint into `staged`, being created on the executor (its size).
    state: Future[int] | None
    payloads: dict[str, Any]
    finishers: list[Callable[[], None]]
    #: How the subtask joined the snapshot (`kstream.protocol.cuts.Cut.encode`).
    cut_on: str = ""


def take_snapshot(
    subject: Subject,
    checkpoint: int,
    *,
    source_offsets: dict[str, dict[int, int]] | None = None,
    channel_offsets: dict[str, dict[int, int]] | None = None,
    alignment_ms: float = 0.0,
    cut_on: str = "",
) -> Taken:
    """Take checkpoint `checkpoint` of `subject` now: state, sinks' pre-commit, barriers.

    Its meta's `sync_ms` is how long the processing thread spent here. The
    barriers go out after the sinks' pre-commit, and the sinks begin epoch
    `checkpoint + 1` before anything else is written.
    """
    t0 = time.perf_counter()
    staged: Path | None = None
    state: Future[int] | None = None
    if subject.state is not None:
        staged = subject.staging / f"chk-{checkpoint}-{subject.task}-{time.monotonic_ns()}"
        state = subject.state.checkpoint_later(staged, subject.executor)
    subject.faults.hit("snapshotting", checkpoint)
    kept = {name: w.pre_commit(checkpoint) for name, w in subject.sinks.items()}
    subject.faults.hit("pre-committed", checkpoint)
    for cw in subject.writers:
        cw.barrier(checkpoint)
    for w in subject.sinks.values():
        w.begin_epoch(checkpoint + 1)
    sync_ms = (time.perf_counter() - t0) * 1000
    meta = SnapshotMeta(
        checkpoint=checkpoint,
        generation=subject.generation,
        task=subject.task,
        source_offsets=source_offsets or {},
        channel_offsets=channel_offsets or {},
        has_state=staged is not None,
        alignment_ms=alignment_ms,
        sync_ms=sync_ms,
        sink={name: k.meta for name, k in kept.items()},
        identity=subject.identity,
        state_serde=subject.state_serde if staged is not None else "",
        watermarks=subject.watermarks(),
        key_format=subject.key_format,
        max_parallelism=subject.max_parallelism,
        parallelism=subject.parallelism,
    )
    return Taken(
        meta,
        staged,
        state,
        {name: k.payload for name, k in kept.items()},
        [k.finish for k in kept.values() if k.finish is not None],
        cut_on,
    )
