"""The Iceberg sink's marks in snapshot summaries, and what a commit or a recovery does.

Every snapshot the sink makes carries three summary properties: `SINK_KEY` (the
subtask's head ``kstream:<job>:<sink>:<subtask>``), `EPOCH_KEY` (the newest epoch it
commits; a subtask commits its epochs in order, so every older one was committed
before) and `GENERATION_KEY` (the generation of the process that made it). A
recovery also makes a snapshot without files, carrying its generation only: the
fence a zombie of an older generation finds in the table's history.

Pure: no I/O, so the decisions are unit-tested (hypothesis) apart from Iceberg.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kstream.errors import ProducerFencedError

__all__ = [
    "EPOCH_KEY",
    "GENERATION_KEY",
    "SINK_KEY",
    "Mark",
    "Plan",
    "digest",
    "head",
    "newest_mark",
    "plan",
    "summary",
]

SINK_KEY = "kstream.sink"
EPOCH_KEY = "kstream.epoch"
GENERATION_KEY = "kstream.generation"
_DIGEST_CHARS = 16


def head(job: str, sink: str, subtask: str) -> str:
    """The name of one sink subtask in the summaries."""
    return f"kstream:{job}:{sink}:{subtask}"


def digest(h: str) -> str:
    """A short fixed-length digest of head `h`, for data file names."""
    return hashlib.sha256(h.encode()).hexdigest()[:_DIGEST_CHARS]


@dataclass(frozen=True, slots=True)
class Mark:
    """What the newest snapshot of a subtask records.

    `epoch`: every epoch of the subtask up to it is committed (None: none is).
    `generation`: the generation that made the snapshot.
    """

    epoch: int | None
    generation: int


def summary(h: str, epoch: int | None, generation: int) -> dict[str, str]:
    """The summary properties of a snapshot subtask `h` makes."""
    props = {SINK_KEY: h, GENERATION_KEY: str(generation)}
    if epoch is not None:
        props[EPOCH_KEY] = str(epoch)
    return props


def _number(text: str | None) -> int | None:
    # ASCII digits only: int() also takes "٣", " 1" and "+1".
    if text is None or not (text.isascii() and text.isdecimal()):
        return None
    return int(text)


def newest_mark(lineage: Iterable[Mapping[str, str]], h: str) -> Mark | None:
    """The mark of subtask `h` in the newest snapshot that has one.

    `lineage`: the summaries of the branch's snapshots, newest first (the current
    snapshot, its parent, ...). Snapshots of other subtasks and of other writers,
    and marks that do not parse, are passed over. None: `h` never committed.
    """
    for props in lineage:
        if props.get(SINK_KEY) != h:
            continue
        generation = _number(props.get(GENERATION_KEY))
        if generation is None:
            continue
        raw = props.get(EPOCH_KEY)
        epoch = _number(raw)
        if raw is not None and epoch is None:
            continue
        return Mark(epoch, generation)
    return None


@dataclass(frozen=True, slots=True)
class Plan:
    """What one commit of a subtask does.

    `epochs`: the pending epochs whose files it appends (oldest first); `epoch`:
    the epoch its snapshot records; `snapshot`: whether it makes a snapshot at all.
    """

    epochs: tuple[int, ...]
    epoch: int | None
    snapshot: bool


def plan(
    mark: Mark | None,
    pending: Sequence[int],
    upto: int | None,
    generation: int,
    *,
    fence: bool,
    who: str = "this sink subtask",
) -> Plan:
    """Decide a commit of the pending epochs ``<= upto`` (all if `upto` is None).

    `mark`: the subtask's newest mark in the table. A mark of a newer generation
    than `generation` means a successor recovered: `ProducerFencedError`. Pending
    epochs up to the mark's epoch were committed already (by this subtask before a
    crash, or by a zombie before the successor's recovery) and are skipped. With
    `fence` (a recovery) a snapshot is made even without files, unless the newest
    mark is this generation's already.
    """
    if mark is not None and mark.generation > generation:
        raise ProducerFencedError(
            f"{who}: generation {mark.generation} committed to the table, this writer is "
            f"generation {generation}: a newer process took over"
        )
    done = mark.epoch if mark is not None else None
    epochs = tuple(
        sorted(
            e for e in set(pending) if (upto is None or e <= upto) and (done is None or e > done)
        )
    )
    epoch = epochs[-1] if epochs else done
    fenced_already = mark is not None and mark.generation == generation
    return Plan(epochs, epoch, bool(epochs) or (fence and not fenced_already))
