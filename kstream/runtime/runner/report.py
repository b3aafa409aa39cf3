"""What the console of `kstream run` says while a job runs and when it stops (pure, no I/O).

The runner feeds `RunReport` every control message it writes (triggers,
completions, aborts, recoveries) and every heartbeat it reads, with the time;
`RunReport` returns the notice lines to print now and, at the end, the
summary. Notices, each rate-limited per kind by `kstream.runtime.runner.notices.Notices`:

* ``dead letter: <task>: <topic>[<partition>]@<offset>: <error> -> <topic>``
  when a worker reports new dead letters;
* ``checkpoint N aborted: <reason>``, also for checkpoints a recovery rolled back;
* ``recovery: <cause>; rolling back to checkpoint N`` — a worker died or
  stopped answering (its heartbeats stopped), or checkpoints kept timing out;
* ``worker <w>: <subtask>: <function>() ... has not returned for 10s on (<args>)
  from <topic>[<partition>]@<offset>; stuck at <file>:<line> in <function>``
  once per call a worker reports stuck (`kstream.runtime.worker.stuck`).

The first ``recover`` of a run is its start, not a recovery.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import assert_never

from kstream.protocol.checkpoint_history import CheckpointRecord, CheckpointTracker
from kstream.protocol.counters import JobCounters
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
from kstream.protocol.names import dead_letter_topic
from kstream.runtime.runner.notices import Notices

__all__ = ["RunReport"]

#: The summary names this many distinct recovery causes, the most frequent first.
MAX_CAUSES = 5


@dataclass(slots=True)
class RunReport:
    """Notices and the exit summary of one run of job `job`."""

    job: str
    notices: Notices = field(default_factory=Notices)
    checkpoints: CheckpointTracker = field(default_factory=CheckpointTracker)
    counters: JobCounters = field(default_factory=JobCounters)
    completed: int = 0
    aborted: int = 0
    latest: int | None = None
    #: Recoveries of this run by cause.
    recoveries: Counter[str] = field(default_factory=Counter)
    started_at: float | None = None
    #: Per worker, the stuck call it reports (`WorkerAlive.stuck_on`), told once.
    stuck: dict[str, str] = field(default_factory=dict)

    def observe(self, message: ControlMessage, now: float) -> list[str]:
        """Feed one control message; return the notice lines to print now."""
        lines: list[str] = []
        match message:
            case WorkerAlive():
                return self._heartbeat(message, now)
            case Recovered() if self.started_at is None:
                self.started_at = now
            case Recovered():
                cause = message.reason or "unknown cause"
                self.recoveries[cause] += 1
                to = message.checkpoint
                where = f"checkpoint {to}" if to is not None else "the start (no checkpoint)"
                lines += self.notices.offer(
                    "recovery", f"recovery: {cause}; rolling back to {where}", now
                )
            case (
                Triggered()
                | Initiated()
                | Acked()
                | Declined()
                | Completed()
                | Aborted()
                | WorkerFailed()
                | RestoreFailed()
                | Presence()
            ):
                pass  # checkpoints they end are told below
            case SavepointRequested() | SavepointDone():
                pass  # told by the savepoint's own lines
            case _:
                assert_never(message)
        for record in self.checkpoints.observe(message):
            lines += self._ended(record, now)
        return lines

    def tick(self, now: float) -> list[str]:
        """Notices held back whose period is over."""
        return self.notices.tick(now)

    def flush(self, now: float) -> list[str]:
        """Every notice still held back: the run ends."""
        return self.notices.flush(now)

    def _ended(self, record: CheckpointRecord, now: float) -> list[str]:
        if record.status == "completed":
            self.completed += 1
            self.latest = record.checkpoint
            return []
        self.aborted += 1
        return self.notices.offer("abort", f"checkpoint {record.checkpoint} {record.label}", now)

    def _heartbeat(self, message: WorkerAlive, now: float) -> list[str]:
        lines: list[str] = []
        if not message.stuck:
            self.stuck.pop(message.worker, None)
        elif self.stuck.get(message.worker) != message.stuck_on:
            self.stuck[message.worker] = message.stuck_on
            lines += self.notices.offer("stuck", f"worker {message.worker}: {message.stuck}", now)
        return lines + self._dead_letters(message, now)

    def _dead_letters(self, message: WorkerAlive, now: float) -> list[str]:
        if message.counters is None or message.process is None:
            return []
        added = self.counters.observe(message.process, message.counters)
        if not added.dead_letters:
            return []
        example = message.dead_letter or f"worker {message.worker}"
        text = f"dead letter: {example} -> {dead_letter_topic(self.job)}"
        return self.notices.offer("dead letter", text, now, count=added.dead_letters)

    def summary(self, now: float) -> list[str]:
        """The lines printed when the run ends."""
        total = self.counters.total
        ran = "" if self.started_at is None else f" after {now - self.started_at:.0f} s"
        lines = [
            f"job {self.job} stopped{ran}",
            f"  records: {total.records_in:,} read from sources, {total.records_out:,} written "
            f"to sinks, {total.dead_letters:,} dead letter{'' if total.dead_letters == 1 else 's'} "
            f"({dead_letter_topic(self.job)})",
            f"  checkpoints: {self.completed:,} completed"
            + (f" (latest {self.latest})" if self.latest is not None else "")
            + f", {self.aborted:,} aborted",
        ]
        n = sum(self.recoveries.values())
        causes = "; ".join(
            cause if count == 1 else f"{cause} (x{count})"
            for cause, count in self.recoveries.most_common(MAX_CAUSES)
        ) + ("; ..." if len(self.recoveries) > MAX_CAUSES else "")
        lines.append(f"  recoveries: {n}" + (f" - {causes}" if causes else ""))
        if n:
            lines.append("  (records replayed after a recovery are counted again)")
        return lines
