"""The sink's two-phase commit ledger (`kstream.protocol.twophase`): exact actions, and a
model of Kafka transactions under random crashes that proves exactly-once output."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kstream.errors import ConfigurationError, ProtocolError
from kstream.protocol.twophase import Begin, Commit, EpochLedger, Replay, Resume, Seal, Wait


def test_an_epoch_begins_on_first_write_and_commits_when_its_checkpoint_completes() -> None:
    ledger = EpochLedger(pool=3)
    assert ledger.write() == Begin(0)
    assert ledger.write() is None  # already open
    assert ledger.pre_commit(1) == Seal(0, 1)
    assert ledger.write() == Begin(1)  # epoch 2 overlaps epoch 1's pending commit
    assert ledger.complete(1) == [Commit(0, 1)]
    assert ledger.pending == []


def test_an_empty_epoch_opens_and_commits_nothing() -> None:
    ledger = EpochLedger(pool=2)
    assert ledger.pre_commit(1) is None
    assert ledger.complete(1) == []


def test_a_full_pool_waits_until_a_completion_frees_a_slot() -> None:
    ledger = EpochLedger(pool=2)
    for epoch in (1, 2):
        ledger.write()
        ledger.pre_commit(epoch)
    assert ledger.write() == Wait()
    assert ledger.complete(1) == [Commit(0, 1)]
    assert ledger.write() == Begin(0)


def test_a_failed_checkpoints_epoch_commits_with_the_next_completed_one() -> None:
    ledger = EpochLedger(pool=3)
    ledger.write()
    ledger.pre_commit(4)
    ledger.abort(4)
    ledger.write()
    ledger.pre_commit(5)
    assert ledger.complete(5) == [Commit(0, 4), Commit(1, 5)]


def test_checkpoints_that_keep_failing_resume_the_newest_failed_epochs_transaction() -> None:
    ledger = EpochLedger(pool=2)
    for epoch in (1, 2):
        ledger.write()
        ledger.pre_commit(epoch)
    assert ledger.write() == Wait()  # checkpoint 2 may still complete
    ledger.abort(1)
    assert ledger.write() == Wait()  # only the newest sealed epoch's transaction goes on
    ledger.abort(2)
    assert ledger.write() == Resume(1)
    assert ledger.write() is None
    assert ledger.complete(3) == [Commit(0, 1)]  # never the open transaction
    assert ledger.pre_commit(4) == Seal(1, 4)
    ledger.abort(4)
    assert ledger.write() == Begin(0)  # a free slot first
    assert ledger.pre_commit(5) == Seal(0, 5)
    assert ledger.complete(5) == [Commit(1, 4, earlier=(2,)), Commit(0, 5)]
    assert ledger.pending == []


def test_an_epoch_pre_committed_after_the_failed_one_must_fail_too() -> None:
    ledger = EpochLedger(pool=2)
    for epoch in (1, 2):
        ledger.write()
        ledger.pre_commit(epoch)
    ledger.abort(1)
    ledger.abort(2)
    assert ledger.pre_commit(3) is None  # empty, still pending: it could complete
    assert ledger.write() == Wait()
    ledger.abort(3)
    assert ledger.write() == Resume(1)


def test_a_checkpoint_aborted_before_this_sink_pre_commits_it_counts_as_failed() -> None:
    ledger = EpochLedger(pool=2)
    ledger.write()
    ledger.pre_commit(1)
    ledger.abort(2)  # declined elsewhere while its barrier travelled here
    ledger.write()
    ledger.pre_commit(2)
    ledger.abort(1)
    assert ledger.write() == Resume(1)


def test_recovery_replays_exactly_the_kept_epochs_after_the_last_committed_marker() -> None:
    ledger = EpochLedger(pool=3)
    ledger.write()
    ledger.pre_commit(9)  # forgotten: a rollback discards everything open or sealed
    actions = ledger.recover(restored=7, kept=[5, 6, 7], last_committed=5)
    assert actions == [Replay(6), Replay(7)]
    assert ledger.pending == []
    assert ledger.open_slot is None


def test_recovery_never_replays_epochs_after_the_restored_checkpoint() -> None:
    ledger = EpochLedger(pool=3)
    assert ledger.recover(restored=3, kept=[3, 4], last_committed=0) == [Replay(3)]
    assert ledger.recover(restored=None, kept=[], last_committed=0) == []


def test_epochs_must_grow() -> None:
    ledger = EpochLedger(pool=2)
    ledger.pre_commit(3)
    with pytest.raises(ProtocolError):
        ledger.pre_commit(3)


def test_one_producer_is_not_enough() -> None:
    with pytest.raises(ConfigurationError):
        EpochLedger(pool=1)


# -- a model of Kafka transactions with crashes ----------------------------------


@dataclass
class Broker:
    """Transactions per producer slot; commits append to the output log."""

    open: dict[int, list[str]] = field(default_factory=dict)
    markers: dict[int, list[int]] = field(default_factory=dict)  # slot -> its open markers
    output: list[str] = field(default_factory=list)
    committed_markers: list[int] = field(default_factory=list)

    def fence_all(self) -> None:
        """init_transactions on every slot: whatever a dead process left open is aborted."""
        self.open.clear()
        self.markers.clear()

    def commit(self, slot: int) -> None:
        self.output += self.open.pop(slot, [])
        self.committed_markers += self.markers.pop(slot, [])


class SinkUnderCrashes(RuleBasedStateMachine):
    """A sink subtask driven like the worker drives it, crashing at any point.

    The writer keeps write-ahead copies of sealed epochs (as `TransactionalWriter`
    does) and each snapshot holds them. A crash loses the process; recovery
    restores the latest completed checkpoint. Whatever happens, the committed
    output must be exactly the records of the surviving epochs covered by a
    completed checkpoint, each once, oldest epoch first.
    """

    def __init__(self) -> None:
        super().__init__()
        self.broker = Broker()
        self.ledger = EpochLedger(pool=3)
        self.next_id = 1
        self.open_records: list[str] = []
        self.wal: dict[int, list[str]] = {}  # sealed, uncommitted epochs' records
        self.snapshots: dict[int, dict[int, list[str]]] = {}
        self.in_flight: list[int] = []  # checkpoints sealed, neither completed nor aborted
        self.aborted_ahead: set[int] = set()  # aborted before their barrier came
        self.completed = 0
        self.timeline: list[tuple[int, list[str]]] = []  # surviving sealed epochs
        self.counter = 0

    # -- what the writer does ----------------------------------------------

    def _commit_upto(self, n: int, crash_after: int | None = None) -> None:
        """Run the ledger's commits for `n`, the process dying after `crash_after` of them."""
        for i, action in enumerate(self.ledger.complete(n)):
            if crash_after is not None and i >= crash_after:
                return
            self.broker.commit(action.slot)
            for e in (*action.earlier, action.epoch):
                del self.wal[e]

    def _recover(self) -> None:
        self.broker.fence_all()
        restored = self.completed or None
        kept = self.snapshots.get(self.completed, {})
        last = max(self.broker.committed_markers, default=0)
        self.ledger = EpochLedger(pool=3)  # a new process
        self.open_records, self.wal = [], {}
        for action in self.ledger.recover(restored, kept, last):
            self.broker.output += kept[action.epoch]
            self.broker.committed_markers.append(action.epoch)
        self.timeline = [(e, r) for e, r in self.timeline if e <= self.completed]
        self.in_flight = []
        # Checkpoint ids keep growing across recoveries.
        self.next_id += 1

    # -- rules -------------------------------------------------------------

    @rule(n=st.integers(min_value=1, max_value=4))
    def write(self, n: int) -> None:
        for _ in range(n):
            action = self.ledger.write()
            if isinstance(action, Wait):
                return  # the real writer pumps completions; here the rules do
            if isinstance(action, Begin):
                assert action.slot not in self.broker.open
                self.broker.open[action.slot] = []
            if isinstance(action, Resume):
                assert action.slot in self.broker.open
            self.counter += 1
            record = f"r{self.counter}"
            assert self.ledger.open_slot is not None
            self.broker.open[self.ledger.open_slot].append(record)
            self.open_records.append(record)

    @rule()
    def barrier(self) -> None:
        n = self.next_id
        self.next_id += 1
        seal = self.ledger.pre_commit(n)
        if seal is not None:
            self.broker.markers.setdefault(seal.slot, []).append(seal.epoch)
            self.wal[n] = self.open_records
        self.timeline.append((n, self.open_records))
        self.open_records = []
        self.snapshots[n] = {e: list(r) for e, r in self.wal.items()}
        if n not in self.aborted_ahead:
            self.in_flight.append(n)

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        n = data.draw(st.sampled_from(self.in_flight))
        self.in_flight = [m for m in self.in_flight if m > n]
        self.completed = n
        self._commit_upto(n)

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data())
    def abort(self, data: st.DataObject) -> None:
        n = data.draw(st.sampled_from(self.in_flight))
        self.in_flight.remove(n)
        self.ledger.abort(n)

    @rule()
    def abort_before_the_barrier(self) -> None:
        """The next checkpoint fails (declined elsewhere) before its barrier gets here."""
        self.aborted_ahead.add(self.next_id)
        self.ledger.abort(self.next_id)

    @precondition(lambda self: self.in_flight)
    @rule(data=st.data(), commits_before_crash=st.integers(min_value=0, max_value=3))
    def complete_then_crash_in_the_commit_window(
        self, data: st.DataObject, commits_before_crash: int
    ) -> None:
        n = data.draw(st.sampled_from(self.in_flight))
        self.completed = n  # durable in the control topic before any commit
        self._commit_upto(n, crash_after=commits_before_crash)
        self._recover()

    @rule()
    def crash(self) -> None:
        self._recover()

    # -- the property ------------------------------------------------------

    @invariant()
    def output_is_exactly_the_completed_epochs(self) -> None:
        expected = [r for e, records in self.timeline if e <= self.completed for r in records]
        assert self.broker.output == expected
        assert len(self.broker.committed_markers) == len(set(self.broker.committed_markers))


TestSinkUnderCrashes = SinkUnderCrashes.TestCase
TestSinkUnderCrashes.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
