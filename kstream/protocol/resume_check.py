"""Whether a checkpoint can still be resumed from what the job's internal topics hold now.

A completed checkpoint points into the job's internal topics:

* the control topic records that it completed, in which generation, and with
  which job identity: without that record a restart starts from scratch while
  the checkpoint is on disk, and reads the whole input again;
* a channel topic must hold the records from the position each downstream
  subtask recorded (for an unaligned snapshot, through its recorded channel
  state): otherwise the subtask waits for offsets that are never written again,
  or skips records that are gone;
* the commit-marker topic tells a sink that declares commit markers
  (`Sink.commit_markers`: the Kafka transactional sink) which epochs its
  snapshot kept are already published: without the markers it publishes them
  again.

A topic deleted (or deleted and created again, empty), or cut by retention,
loses these, and a resume would go wrong without a word. The runner gathers
the facts (the snapshots' recorded positions, each partition's log start and
end, what the control topic says) and these functions decide, with no I/O,
whether to refuse and why (`lost_history`, `needs`, `unmet`, `refusal`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Need",
    "StoredCheckpoint",
    "Watermarks",
    "channel_needs",
    "lost_history",
    "marker_need",
    "refusal",
    "unmet",
]

#: The way on, said with every refusal.
ADVICE = (
    "start the job again with --fresh (its state is dropped and its input is read "
    "again, so output is written again)"
)

#: Topic -> partition -> (log start, end) offsets; None for a topic that does not exist.
Watermarks = Mapping[str, Mapping[int, tuple[int, int]] | None]


@dataclass(frozen=True, slots=True)
class Need:
    """What a resume reads from partition `partition` of internal topic `topic`.

    The partition must end at or after offset `end` and, unless `first` is
    None, still hold offset `first` (its log start at or before it). `what`
    names the records for a message ("records", "commit markers").
    """

    topic: str
    partition: int
    first: int | None
    end: int
    what: str = "records"


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """The newest checkpoint on disk, and the generation its snapshots were taken in
    (0 when none of its snapshots could be read)."""

    checkpoint: int
    generation: int


def lost_history(
    stored: StoredCheckpoint | None, completed: Sequence[int], started: int
) -> str | None:
    """Why the control topic no longer holds the history of the checkpoint on disk
    (None: it holds it, or no checkpoint is stored).

    `completed` are the completions the control topic holds, `started` the
    newest generation a ``recover`` there opened (0: none). A checkpoint is
    taken in a generation the control topic opened, and retention keeps the
    latest ``recover`` and the retained completions, so a topic that holds
    neither a completion nor a ``recover`` of that generation (or a later one)
    was deleted, or emptied, since. A checkpoint stored but never completed
    (the runner died first) leaves its generation's ``recover``: no refusal.
    """
    if stored is None or completed or started >= max(stored.generation, 1):
        return None
    return (
        "no longer holds the job's checkpoint history (deleted?): it names no completed "
        f"checkpoint and not generation {stored.generation}, which took the checkpoint on disk"
    )


def channel_needs(
    offsets: Mapping[str, Mapping[int, int]],
    replay: Mapping[str, Mapping[int, Sequence[Sequence[int]]]],
) -> list[Need]:
    """What a subtask's snapshot reads of its channels: from its recorded positions
    (`SnapshotMeta.channel_offsets`) through the ends of its replay windows
    (`SnapshotMeta.channel_replay`, ``[end, generation]`` pairs)."""
    out = []
    for topic, parts in sorted(offsets.items()):
        for p, first in sorted(parts.items()):
            windows = replay.get(topic, {}).get(p, ())
            end = max([first, *(w[0] for w in windows)])
            out.append(Need(topic, p, first, end))
    return out


def marker_need(
    topic: str, partition: int, sink: Mapping[str, Any], *, markers: bool
) -> Need | None:
    """What a sink's snapshot (`sink`, its meta) reads of its commit-marker
    partition; None if nothing.

    `markers` is the sink's declared `kstream.dataflow.outputs.Sink.commit_markers`:
    only a sink that confirms its kept epochs by commit markers (the Kafka
    transactional sink) reads any. The others (PostgreSQL, Delta, Iceberg)
    confirm theirs in the destination and read nothing of the topic, whatever
    their ``pending`` holds.

    Only a snapshot that kept epochs (``pending``) reads markers: a recovery
    re-publishes the kept epochs after the newest committed marker. Each kept
    epoch's marker was written, after the newest marker known committed then
    (``marker``: [partition, offset]), so the partition ends past both, and
    still holds that committed one.
    """
    pending = sink.get("pending")
    if not markers or not isinstance(pending, list) or not pending:
        return None
    marker = sink.get("marker")
    first: int | None = None
    if isinstance(marker, list) and len(marker) == 2 and marker[0] == partition:
        first = marker[1] if type(marker[1]) is int else None
    end = (first + 1 if first is not None else 0) + len(pending)
    return Need(topic, partition, first, end, "commit markers")


def unmet(needs: Iterable[Need], watermarks: Watermarks) -> tuple[str, str] | None:
    """The first need (in topic, partition order) the topics fail: (topic, why); None if all met.

    A need ending at offset 0 reads nothing and is met even by a missing topic
    (the runner creates it).
    """
    for need in sorted(needs, key=lambda n: (n.topic, n.partition)):
        if need.end == 0 and not need.first:
            continue
        parts = watermarks.get(need.topic)
        if parts is None:
            return need.topic, "no longer exists (deleted?)"
        if need.partition not in parts:
            return need.topic, f"has no partition {need.partition}"
        low, high = parts[need.partition]
        p = need.partition
        if high < need.end:
            reads = (
                f"resumes reading it at offset {need.end}"
                if need.first == need.end
                else f"reads its {need.what} up to offset {need.end}"
            )
            return need.topic, (
                f"partition {p} ends at offset {high}, but the checkpoint {reads} "
                "(deleted and created again?)"
            )
        if need.first is not None and low > need.first:
            return need.topic, (
                f"partition {p} starts at offset {low}, but the checkpoint reads its "
                f"{need.what} from offset {need.first} (deleted by retention?)"
            )
    return None


def refusal(job: str, checkpoint: int, topic: str, why: str) -> str:
    """The one line that refuses to resume `checkpoint` because internal topic `topic` lost
    what it needs (`why`)."""
    return (
        f"job {job} cannot resume checkpoint {checkpoint}: internal topic {topic} {why}; {ADVICE}"
    )
