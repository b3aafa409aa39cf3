"""What became of each checkpoint, read from the control topic (pure, no I/O).

Every triggered checkpoint ends in one of three ways, and the control topic
(`kstream.runtime.control`) says which:

* ``complete`` — it completed;
* ``abort`` — the coordinator gave it up (timed out, declined, subsumed, or
  the job stopped cleanly while it was pending);
* a ``recover`` of a newer generation while it was still pending — the job
  rolled back and the checkpoint can never complete (its acks belong to a
  generation everyone has left). No ``abort`` is written for these, so the
  rollback is inferred here.

Only a checkpoint pending in the newest generation is still *in progress*.
`CheckpointTracker` follows the messages one at a time (the runner feeds it
what it writes, for notices and the exit summary); `checkpoint_history`
replays a whole history (for ``kstream checkpoints``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, assert_never

from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    ControlMessage,
    Declined,
    Initiated,
    Presence,
    Recovered,
    RestoreFailed,
    SavepointDone,
    SavepointRequested,
    Triggered,
    WorkerAlive,
    WorkerFailed,
)

__all__ = ["CheckpointRecord", "CheckpointTracker", "Status", "checkpoint_history"]

Status = Literal["in progress", "completed", "aborted"]


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """One checkpoint as the control topic tells it.

    `reason` says why an aborted checkpoint was given up; `triggered_at` is the
    wall-clock time of its trigger (None when the trigger is not in the history);
    `started_by` is the source subtask that started it ("": the coordinator);
    `cuts` says, per subtask that acked it in its generation (in ack order), how
    it joined it (`Acked.cut_on`, `kstream.protocol.cuts.Cut.encode`; empty
    when written by an older kstream).
    """

    checkpoint: int
    generation: int | None
    status: Status = "in progress"
    reason: str = ""
    triggered_at: float | None = None
    duration_s: float | None = None
    alignment_ms: float | None = None
    size: int | None = None
    started_by: str = ""
    cuts: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """The status as one phrase: ``completed``, ``aborted: <reason>``, ``in progress``."""
        return (
            f"aborted: {self.reason}" if self.status == "aborted" and self.reason else self.status
        )


@dataclass(slots=True)
class CheckpointTracker:
    """Follows control messages in topic order; knows every checkpoint's fate so far."""

    #: Checkpoints triggered and not yet ended, by id.
    pending: dict[int, CheckpointRecord] = field(default_factory=dict)
    #: The newest generation seen (in a trigger, a recover or any other message).
    generation: int = 0
    #: Per pending checkpoint, the cuts of its acks so far (`CheckpointRecord.cuts`).
    _cuts: dict[int, list[tuple[str, str]]] = field(default_factory=dict)

    def observe(self, message: ControlMessage) -> list[CheckpointRecord]:
        """Feed one control message; return the checkpoints it ended, oldest first.

        Messages that are not about checkpoints (acks, heartbeats, …) end nothing.
        """
        return [
            replace(r, cuts=tuple(self._cuts.pop(r.checkpoint, ()))) for r in self._observe(message)
        ]

    def _observe(self, message: ControlMessage) -> list[CheckpointRecord]:
        match message:
            case Recovered(generation=g):
                self.generation = max(self.generation, g)
                why = message.reason or "recovery"
                return self._end_older_than(g, f"rolled back in generation {g} ({why})")
            case Triggered(checkpoint=n, generation=g):
                self.generation = max(self.generation, g)
                # A source-initiated checkpoint is pending already: this is its relay.
                self.pending.setdefault(n, CheckpointRecord(n, g, triggered_at=message.time))
                return []
            case Initiated(checkpoint=n, generation=g):
                self.generation = max(self.generation, g)
                if g == self.generation:
                    # Registered by the coordinator, or aborted at once (an abort follows).
                    self.pending[n] = CheckpointRecord(
                        n, g, triggered_at=message.time, started_by=message.task
                    )
                return []
            case Completed(checkpoint=n, generation=g):
                self.generation = max(self.generation, g)
                record = replace(
                    self.pending.pop(n, CheckpointRecord(n, g)),
                    status="completed",
                    duration_s=message.duration_s,
                    alignment_ms=message.alignment_ms,
                    size=message.size,
                )
                return [record]
            case Aborted(checkpoint=n, generation=g):
                self.generation = max(self.generation, g)
                return [
                    replace(
                        self.pending.pop(n, CheckpointRecord(n, g)),
                        status="aborted",
                        reason=message.reason,
                    )
                ]
            case Acked(checkpoint=n, generation=g):
                self.generation = max(self.generation, g)
                acked = self.pending.get(n)
                if acked is not None and acked.generation == g:
                    self._cuts.setdefault(n, []).append((message.task, message.cut_on))
                return []
            case Declined() | WorkerAlive() | RestoreFailed():
                self.generation = max(self.generation, message.generation)
                return []
            case WorkerFailed() | Presence():
                return []
            case SavepointRequested() | SavepointDone():
                return []
            case _:
                assert_never(message)

    def _end_older_than(self, generation: int, reason: str) -> list[CheckpointRecord]:
        ended = [
            replace(r, status="aborted", reason=reason)
            for n, r in sorted(self.pending.items())
            if r.generation is None or r.generation < generation
        ]
        for r in ended:
            del self.pending[r.checkpoint]
        return ended

    def open(self) -> list[CheckpointRecord]:
        """Checkpoints not ended yet: in progress if of the newest generation, else aborted."""
        out = []
        for n, r in sorted(self.pending.items()):
            r = replace(r, cuts=tuple(self._cuts.get(n, ())))
            if r.generation is not None and r.generation < self.generation:
                r = replace(
                    r, status="aborted", reason=f"superseded by generation {self.generation}"
                )
            out.append(r)
        return out


def checkpoint_history(messages: Iterable[ControlMessage]) -> list[CheckpointRecord]:
    """Every checkpoint named in `messages` (a job's control topic, in order), by id."""
    tracker = CheckpointTracker()
    ended: dict[int, CheckpointRecord] = {}
    for message in messages:
        for record in tracker.observe(message):
            ended[record.checkpoint] = record
    for record in tracker.open():
        ended[record.checkpoint] = record
    return [ended[n] for n in sorted(ended)]
