"""The two-phase commit of one transactional sink subtask, as a pure state machine.

A sink subtask writes each checkpoint epoch's output in its own Kafka
transaction. Kafka allows one open transaction per producer, and epoch n's
transaction must stay open (pre-committed) until the coordinator declares
checkpoint n complete, while epoch n+1 is already being written. So the sink
keeps a small pool of transactional producers ("slots"), and `EpochLedger`
decides which slot holds which epoch and which transactions to commit:

==========================  =================================================
event                       actions
==========================  =================================================
`write()` (first of epoch)  `Begin(slot)` on a free slot; when every slot
                            holds a pre-committed epoch, `Resume(slot)` if the
                            newest of them and every epoch after it failed
                            (aborted), else `Wait()` (serve checkpoint
                            completions and aborts, then ask again)
`pre_commit(n)`             `Seal(slot, n)`: write the commit marker of n in
                            the same transaction and flush; nothing for an
                            empty epoch (no transaction was begun)
`complete(n)`               `Commit(slot, e)` for every transaction whose
                            sealed epochs are all <= n, oldest first (a failed
                            checkpoint's epoch rides along with the next
                            completed one)
`abort(n)`                  none: the state already holds epoch n's effects,
                            so its output must not be dropped while the job
                            goes on; remembered for `write()`
`recover(n, kept, last)`    `Replay(e)` for each kept epoch e with
                            last < e <= n, oldest first
==========================  =================================================

Why `Resume`: checkpoints that keep failing (a full or read-only checkpoint
storage) would otherwise fill every slot with a sealed epoch that no
completion will free soon, and the sink, and with it the job, would stop
until a rollback. A failed epoch's transaction is instead reopened for the
next epoch: one transaction then holds several consecutive epochs, each with
its marker, and commits them together with the next completed checkpoint
(`Commit.earlier`). Only when the newest sealed epoch and every checkpoint
pre-committed after it failed: no completion can then fall between two epochs
of one transaction, so an epoch is never committed before its checkpoint. The
transaction grows until a checkpoint completes, bounded by the transaction
timeout (the broker aborts it then, and the commit fails into a rollback).

Why `recover` is right (the commit window): a snapshot of checkpoint n holds a
write-ahead copy of every epoch <= n not yet committed when it was taken. The
commit marker of epoch e is written in e's own transaction, so "the marker of e
is committed" is the same fact as "e's output is committed". After a crash the
writer fences every slot (which aborts whatever the dead process left open),
reads the newest committed marker `last`, and the ledger replays exactly the
kept epochs after it. Epochs after n were never part of a completed checkpoint:
upstream regenerates them from the restored positions. Commits go oldest
first, and a transaction's epochs are consecutive, so every epoch <= `last` is
committed and every kept epoch > `last` is not: each epoch is published
exactly once.

The ledger does no I/O and reads no clock; impossible calls (an epoch sealed
twice, epochs out of order) raise `ProtocolError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kstream.errors import ConfigurationError, ProtocolError

__all__ = ["Action", "Begin", "Commit", "EpochLedger", "Replay", "Resume", "Seal", "Wait"]


@dataclass(frozen=True, slots=True)
class Begin:
    """Begin a transaction on producer `slot`: the open epoch's records go there."""

    slot: int


@dataclass(frozen=True, slots=True)
class Resume:
    """Write the open epoch into `slot`'s transaction, still open after a failed
    checkpoint sealed the epoch it holds (no new transaction begins)."""

    slot: int


@dataclass(frozen=True, slots=True)
class Wait:
    """No slot is free: serve checkpoint completions (which commit), then retry."""


@dataclass(frozen=True, slots=True)
class Seal:
    """Pre-commit: write epoch `epoch`'s commit marker into `slot`'s transaction, flush."""

    slot: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Commit:
    """Commit `slot`'s transaction, which holds epoch `epoch` and its marker, after
    the `earlier` epochs (and their markers) of failed checkpoints it resumed."""

    slot: int
    epoch: int
    earlier: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Replay:
    """Re-produce kept epoch `epoch` with its marker in a fresh transaction and commit it."""

    epoch: int


Action = Begin | Resume | Wait | Seal | Commit | Replay


@dataclass
class EpochLedger:
    """Which producer slot holds which epoch, for one sink subtask (see the module doc)."""

    pool: int
    #: Slot of the epoch being written (its transaction is open), or None.
    open_slot: int | None = None
    #: Pre-committed epochs -> their slot, waiting for their checkpoint to complete.
    sealed: dict[int, int] = field(default_factory=dict)
    #: The newest epoch sealed so far (epoch ids only grow).
    last_sealed: int = 0
    #: Epochs pre-committed (sealed or empty) whose checkpoint neither completed
    #: nor failed yet.
    unsettled: set[int] = field(default_factory=set)
    #: Checkpoints that failed before this sink pre-committed them.
    aborted_ahead: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.pool < 2:
            # One slot would make epoch n+1 wait for checkpoint n's completion.
            raise ConfigurationError(f"a transactional sink needs >= 2 producers, got {self.pool}")

    @property
    def pending(self) -> list[int]:
        """Sealed epochs not yet committed, oldest first."""
        return sorted(self.sealed)

    def write(self) -> Begin | Resume | Wait | None:
        """A record is about to be written: make sure a transaction is open (None: it is)."""
        if self.open_slot is not None:
            return None
        busy = set(self.sealed.values())
        for slot in range(self.pool):
            if slot not in busy:
                self.open_slot = slot
                return Begin(slot)
        newest = max(self.sealed)
        if newest not in self.unsettled and not any(e > newest for e in self.unsettled):
            # Its checkpoint failed, and so did every later one this sink saw: the
            # next completion commits them all, the open epoch's too (module doc).
            self.open_slot = self.sealed[newest]
            return Resume(self.open_slot)
        return Wait()

    def pre_commit(self, epoch: int) -> Seal | None:
        """Barrier `epoch` reached the sink: seal the open epoch under that id."""
        if epoch <= self.last_sealed:
            raise ProtocolError(f"epoch {epoch} pre-committed after epoch {self.last_sealed}")
        self.last_sealed = epoch
        if epoch in self.aborted_ahead:
            self.aborted_ahead.discard(epoch)
        else:
            self.unsettled.add(epoch)
        self.aborted_ahead = {e for e in self.aborted_ahead if e > epoch}
        if self.open_slot is None:
            return None  # an empty epoch: no transaction, nothing to commit
        slot, self.open_slot = self.open_slot, None
        self.sealed[epoch] = slot
        return Seal(slot, epoch)

    def complete(self, checkpoint: int) -> list[Commit]:
        """Checkpoint `checkpoint` completed: commit every sealed epoch up to it.

        A transaction is committed once, when every epoch it holds is <= the
        checkpoint and it is not the open one (which `Resume` prevents: kept
        for the next completion, never committed early), oldest first.
        """
        self.unsettled = {e for e in self.unsettled if e > checkpoint}
        by_slot: dict[int, list[int]] = {}
        for e in self.pending:
            by_slot.setdefault(self.sealed[e], []).append(e)
        commits = [
            Commit(slot, epochs[-1], tuple(epochs[:-1]))
            for slot, epochs in by_slot.items()
            if epochs[-1] <= checkpoint and slot != self.open_slot
        ]
        for c in commits:
            for e in (*c.earlier, c.epoch):
                del self.sealed[e]
        return sorted(commits, key=lambda c: c.epoch)

    def abort(self, checkpoint: int) -> None:
        """Checkpoint `checkpoint` failed; its epoch stays sealed for the next completion.

        Nothing to commit or drop, by design (see the module doc); remembered
        so that `write` may resume the epoch's transaction.
        """
        if checkpoint in self.unsettled:
            self.unsettled.discard(checkpoint)
        elif checkpoint > self.last_sealed:
            self.aborted_ahead.add(checkpoint)

    def recover(
        self, restored: int | None, kept: Iterable[int], last_committed: int
    ) -> list[Replay]:
        """After a rollback to `restored`: the kept epochs to publish again.

        `kept` are the epochs whose write-ahead copies the snapshot of
        `restored` holds; `last_committed` is the newest epoch whose commit
        marker is committed (0 if none). Every slot must have been fenced first.
        """
        self.open_slot = None
        self.sealed.clear()
        self.unsettled.clear()
        self.aborted_ahead.clear()
        newest = max(self.last_sealed, last_committed, restored or 0)
        replay = sorted(e for e in set(kept) if last_committed < e <= (restored or 0))
        self.last_sealed = newest
        return [Replay(e) for e in replay]
