"""Record counters of a running job: what workers report and how the runner adds them up.

Each worker process counts, over its whole life, the records its subtasks read
from the job's sources (``records_in``), handed to its sinks (``records_out``)
and sent to the dead-letter topic (``dead_letters``), and the channel records
it processed as a restored snapshot's recorded channel state (``replayed``,
unaligned checkpoints), and reports the running
totals in every heartbeat with an id of the process (`process`). A counter
therefore only grows within one process; a restarted worker is a new process
and starts again from zero. `JobCounters` keeps the latest report of every
process ever seen and sums them, so nothing counted before a restart is lost.

Workers also report right before each checkpoint ack, so what a completed
checkpoint covers has always been reported.

What the figures mean: work is counted when it is done, not when a checkpoint
makes it durable. Every record is counted at least once: work a killed
process did after its last report lies after its last acked checkpoint, so the
rollback replays it and the new process counts it. After a recovery the
replayed records are read, written (under exactly-once the aborted copies
never become visible) and dead-lettered again — and counted again. Under
at-most-once a rollback skips instead of replaying, so what a killed process
did after its last report may go uncounted. In a run without recoveries the
figures are exact once every worker has sent its final report at a clean stop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["JobCounters", "WorkerCounters"]


@dataclass(frozen=True, slots=True)
class WorkerCounters:
    """Running totals of one worker process (or a sum of several)."""

    records_in: int = 0
    records_out: int = 0
    dead_letters: int = 0
    replayed: int = 0

    def __add__(self, other: WorkerCounters) -> WorkerCounters:
        return WorkerCounters(
            self.records_in + other.records_in,
            self.records_out + other.records_out,
            self.dead_letters + other.dead_letters,
            self.replayed + other.replayed,
        )

    def __sub__(self, other: WorkerCounters) -> WorkerCounters:
        return WorkerCounters(
            self.records_in - other.records_in,
            self.records_out - other.records_out,
            self.dead_letters - other.dead_letters,
            self.replayed - other.replayed,
        )

    def to_message(self) -> dict[str, int]:
        """The heartbeat's ``counters`` field."""
        out = {"in": self.records_in, "out": self.records_out, "dead_letters": self.dead_letters}
        if self.replayed:
            # Only then: a job that never replays writes what earlier versions did.
            out["replayed"] = self.replayed
        return out

    @classmethod
    def from_message(cls, body: object) -> WorkerCounters | None:
        """Parse a heartbeat's ``counters`` field; None if absent or malformed."""
        if not isinstance(body, Mapping):
            return None
        values = [
            body.get("in", 0),
            body.get("out", 0),
            body.get("dead_letters", 0),
            body.get("replayed", 0),
        ]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
            return None
        return cls(*values)


@dataclass(slots=True)
class JobCounters:
    """The sum over every worker process of its latest report."""

    #: Latest report per process id.
    latest: dict[str, WorkerCounters] = field(default_factory=dict)

    def observe(self, process: str, counters: WorkerCounters) -> WorkerCounters:
        """Take one report; return what it adds to the total (never negative).

        Reports of one process can arrive out of order only if they were
        reordered in transit, which the single-partition control topic rules
        out; a report lower than the one kept is ignored all the same.
        """
        before = self.latest.get(process, WorkerCounters())
        grown = WorkerCounters(
            max(before.records_in, counters.records_in),
            max(before.records_out, counters.records_out),
            max(before.dead_letters, counters.dead_letters),
            max(before.replayed, counters.replayed),
        )
        self.latest[process] = grown
        return grown - before

    @property
    def total(self) -> WorkerCounters:
        out = WorkerCounters()
        for c in self.latest.values():
            out = out + c
        return out
