"""When a source subtask snapshots: coordinator triggers, its own interval, user requests.

A source subtask has no input channels, so no barrier reaches it: it
snapshots when told (a `Triggered` of the coordinator, its own or relayed
from another source) or when it starts a snapshot itself, on its own
interval (`KafkaSource(snapshot_every_ms=MS)`) or because user code asked
(`kstream.request_snapshot()`). `SourceInitiation` decides, as a pure state
machine (no I/O; the caller passes the time and the worker's `LamportClock`).

The rule that keeps exactly-once: **a subtask takes its snapshots in
increasing id order**, so along every channel barriers come in increasing
id order and every subtask, everywhere in the job, takes the snapshots it
takes in the same order. (Two snapshots taken in opposite orders by two sink
subtasks could not both be committed and restored: each would have
committed output the other's cut does not cover.) So a trigger of an id
below one this subtask took already is declined: that snapshot can never be
a cut here. A trigger of an id it took itself (the relay of its own
initiation) is ignored.

**One at a time.** A subtask starts a snapshot of its own only while no
snapshot it knows of is in flight (one it took or was triggered for, or one
another source announced, `on_announced`, that has not completed or been
aborted): at the default ``--max-in-flight 1`` the coordinator would abort
it at once, and two initiators that keep starting snapshots together would
keep aborting each other (each declines the other's smaller id, or the
limit aborts the later one). A due interval or a request waits until then.
An announcement (the other source's `Initiated`) is read before the
coordinator's relay of it; a source that started one of its own in between
would give it a larger id and have the other's declined (with two sources
requesting by turns, the same one would always lose). The runtime gives an
interval to the first subtask of a source only (one snapshot per interval
per source, not one per subtask).

**Concurrent snapshots** (`concurrent`, seed 004: several snapshots with
distinct ids may run at once, and each completes). The subtask starts one
while fewer than `max_in_flight` it knows of are in flight, and takes a
trigger of an id below one it took already instead of declining it: two
sources that start snapshots independently take each other's after their
own, so the ids cross, and unaligned subtasks record each on its own
(`kstream.protocol.barrier.Aligner.concurrent`). A source whose stage has
sinks (`ordered`) still declines an id below one it took: its sinks seal
their epochs in id order. A trigger of an id it took already (the relay of
its own, or one it was triggered for) is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kstream.errors import ConfigurationError
from kstream.protocol.snapshot_id import LamportClock

__all__ = ["Decline", "Ignore", "SourceInitiation", "Take", "TriggerAnswer"]


@dataclass(frozen=True, slots=True)
class Take:
    """Snapshot `checkpoint` now (between two batches) and write its barriers."""

    checkpoint: int


@dataclass(frozen=True, slots=True)
class Ignore:
    """Nothing to do: this subtask took the snapshot already (it started it)."""


@dataclass(frozen=True, slots=True)
class Decline:
    """Decline `checkpoint`: this subtask took a newer snapshot already."""

    checkpoint: int
    reason: str


TriggerAnswer = Take | Ignore | Decline


@dataclass(slots=True)
class SourceInitiation:
    """The snapshot decisions of one source subtask in one generation.

    `last` is the checkpoint it was restored from (0: none), `every` its own
    snapshot interval in seconds (None: it starts snapshots only on request),
    `now` the time it opened (its first own snapshot is due one interval later).
    """

    initiator: int
    last: int = 0
    every: float | None = None
    now: float = 0.0
    #: Start snapshots while fewer than `max_in_flight` are in flight, and take
    #: triggers in any id order (module doc, "Concurrent snapshots").
    concurrent: bool = False
    max_in_flight: int = 1
    #: With `concurrent`: the stage has sinks, so its snapshots stay in id order.
    ordered: bool = False
    #: When it last started a snapshot itself (or opened).
    _started_at: float = field(init=False)
    #: Snapshots it started itself and not yet known complete (their relays come back).
    _own: set[int] = field(default_factory=set, init=False)
    _requested: bool = field(default=False, init=False)
    #: The newest checkpoint known complete: a trigger up to it is news of the past.
    _complete: int = field(default=0, init=False)
    #: Snapshots it took that are neither complete nor aborted yet.
    _in_flight: set[int] = field(default_factory=set, init=False)
    #: Snapshots other sources started, not yet triggered here, complete or aborted.
    _announced: set[int] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        if self.every is not None and not self.every > 0:
            raise ConfigurationError(f"snapshot_every must be > 0 seconds, got {self.every}")
        if self.max_in_flight < 1:
            raise ConfigurationError(f"max in-flight snapshots must be >= 1: {self.max_in_flight}")
        self._started_at = self.now

    def on_announced(self, checkpoint: int) -> None:
        """A source (maybe this one) announced it started `checkpoint`: until its
        trigger comes here, or it completes or is aborted, start none of its own."""
        if checkpoint in self._own or checkpoint in self._in_flight:
            return  # its own, or one it took: nothing to wait for
        if checkpoint <= max(self._complete, self.last) and not (
            self.concurrent and not self.ordered
        ):
            return  # one it took or will decline: nothing to wait for
        self._announced.add(checkpoint)

    def on_trigger(self, checkpoint: int) -> TriggerAnswer:
        """Checkpoint `checkpoint` was triggered (by the coordinator, or relayed)."""
        self._announced.discard(checkpoint)
        if self.concurrent:
            return self._on_trigger_concurrent(checkpoint)
        if checkpoint in self._own or checkpoint <= self._complete:
            # Its own, relayed (maybe read after it completed: every subtask
            # acked a completed checkpoint, so this one took it already).
            return Ignore()
        if checkpoint <= self.last:
            return Decline(
                checkpoint,
                f"overtaken: this source took snapshot {self.last} already "
                "(snapshots are taken in id order)",
            )
        self.last = checkpoint
        self._in_flight.add(checkpoint)
        return Take(checkpoint)

    def _on_trigger_concurrent(self, checkpoint: int) -> TriggerAnswer:
        if checkpoint in self._own:
            # The relay of its own (every relay is read before the completion or
            # abort of its id, which forget it: `forget`).
            self._own.discard(checkpoint)
            return Ignore()
        if checkpoint in self._in_flight:
            return Ignore()
        if self.ordered and checkpoint <= self.last:
            return Decline(
                checkpoint,
                f"overtaken: this source took snapshot {self.last} already "
                "(its sinks seal their epochs in id order)",
            )
        self.last = max(self.last, checkpoint)
        self._in_flight.add(checkpoint)
        return Take(checkpoint)

    def request(self) -> None:
        """User code asked for a snapshot: start one at the next batch boundary
        with nothing in flight."""
        self._requested = True

    def start(self, now: float, clock: LamportClock) -> int | None:
        """Between two batches: the id of a snapshot to start now, or None.

        The caller announces it (`Initiated`, flushed) before it writes any
        barrier, then takes the snapshot.
        """
        due = self.every is not None and now - self._started_at >= self.every
        if not (due or self._requested):
            return None
        busy = len(self._in_flight | self._announced)
        if busy >= (self.max_in_flight if self.concurrent else 1):
            return None
        self._requested = False
        self._started_at = now
        clock.observe(self.last)
        n = clock.tick(self.initiator)
        self.last = n
        self._own.add(n)
        self._in_flight.add(n)
        return n

    def on_complete(self, checkpoint: int) -> None:
        """`checkpoint` completed: no relay of an id up to it can come any more
        (concurrent: of it; older ones may still complete)."""
        self._complete = max(self._complete, checkpoint)
        if self.concurrent:
            self.on_abort(checkpoint)
            return
        self._own = {n for n in self._own if n > checkpoint}
        # Older ones are aborted (subsumed) anyway; their aborts may come later.
        self._in_flight = {n for n in self._in_flight if n > checkpoint}
        self._announced = {n for n in self._announced if n > checkpoint}

    def on_abort(self, checkpoint: int) -> None:
        """`checkpoint` was aborted: it is no longer in flight."""
        self._in_flight.discard(checkpoint)
        self._announced.discard(checkpoint)
        if self.concurrent:
            # Its relay, if any, came before (the caller drops one still queued).
            self._own.discard(checkpoint)

    @property
    def in_flight(self) -> frozenset[int]:
        """Snapshots this subtask took that are neither complete nor aborted yet."""
        return frozenset(self._in_flight)
