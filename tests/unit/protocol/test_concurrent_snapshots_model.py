"""Concurrent snapshots over random interleavings of several initiators (seed 004).

The model of `test_snapshot_ids_model` (source subtasks, the real
`Coordinator`, one downstream subtask's `Aligner`, one control topic read at
each participant's pace, lost workers, coordinator restarts) with
concurrent snapshots: unaligned, `CoordinatorConfig.concurrent`, sources
that start snapshots while fewer than ``--max-in-flight`` are in flight and
take triggers in any id order, and a downstream subtask that cuts each
snapshot on its initiator's marker (`Aligner.reach`: source i reaches
channel i only). Besides the model's checks (ids unique and above what
their starter saw, completions acked by every subtask, no deadlock once the
requests stop), it checks that:

* every completed snapshot is a consistent cut: the downstream subtask's
  state at its snapshot plus its recorded channel state are exactly the
  records each source wrote before its barrier;
* a snapshot started by a source is cut downstream on that source's channel;
* the restore point stays the completed checkpoint with the largest id.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from kstream.protocol.barrier import (
    AbandonAlignment,
    Aligner,
    Alignment,
    Block,
    ChannelStateComplete,
    Drop,
    Process,
    RecordArrived,
    TakeSnapshot,
    Unblock,
)
from kstream.protocol.coordination import (
    Abort,
    Complete,
    CoordinatorConfig,
    Discard,
    Halt,
    Recover,
    Tick,
    Trigger,
)
from kstream.protocol.coordinator import Coordinator
from kstream.protocol.initiation import SourceInitiation
from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    Declined,
    Initiated,
    Recovered,
    Triggered,
    checkpoint_of,
)
from kstream.protocol.snapshot_id import LamportClock, SnapshotId, source_initiator
from tests.unit.protocol.test_snapshot_ids_model import (
    CHANNELS,
    SOURCES,
    SUM,
    TASKS,
    SnapshotIds,
    Source,
)

Record = tuple[int, int]  # (channel, offset)


class ConcurrentSnapshots(SnapshotIds):
    @initialize(max_in_flight=st.integers(2, 4), timeout=st.sampled_from([2.0, 10.0]))
    def start(self, max_in_flight: int, timeout: float) -> None:  # type: ignore[override]
        self.mode = Alignment.UNALIGNED
        self.config = CoordinatorConfig(
            interval=1.0,
            timeout=timeout,
            max_in_flight=max_in_flight,
            retained=2,
            concurrent=True,
        )
        self.coordinator = Coordinator(TASKS, self.config)
        self.execute(self.coordinator.start(self.now))

    def restore(self, generation: int, checkpoint: int | None) -> None:
        self.generation = generation
        last = checkpoint or 0
        self.sources = []
        for i in range(SOURCES):
            clock = LamportClock()
            for m in self.control:
                clock.observe(checkpoint_of(m))
            initiation = SourceInitiation(
                source_initiator(i),
                last,
                concurrent=True,
                max_in_flight=self.config.max_in_flight,
            )
            self.sources.append(Source(i, initiation, clock, cursor=len(self.control)))
        self.channels = [[] for _ in CHANNELS]
        self.read = [0] * SOURCES
        self.blocked: set[int] = set()
        reach = {source_initiator(i): [c] for i, c in enumerate(CHANNELS)}
        self.aligner = Aligner.over(
            CHANNELS, generation, last, self.mode, reach=reach, concurrent=True
        )
        self.sum_cursor = len(self.control)
        #: The downstream subtask's records processed in this generation, and its
        #: snapshots: id -> (state, restore offsets once complete).
        self.processed: set[Record] = set()
        self.cuts: dict[int, tuple[set[Record], dict[int, int] | None]] = {}
        self.cut_on: dict[int, int | None] = {}

    def execute(self, commands: list[object]) -> None:  # type: ignore[override]
        for command in commands:
            match command:
                case Trigger(checkpoint=n, generation=g):
                    relay = any(
                        isinstance(m, Initiated) and m.checkpoint == n for m in self.control
                    )
                    if not relay:
                        assert n not in self.started, f"id {n} reused"
                        self.started.add(n)
                    self.write(Triggered(n, g))
                case Complete(checkpoint=n, generation=g):
                    assert self.acked.get((g, n), set()) == TASKS, "completed without every ack"
                    assert n not in self.completions
                    self.check_cut(n)
                    self.completions.append(n)
                    self.write(Completed(n, g))
                case Abort(checkpoint=n, generation=g):
                    self.write(Aborted(n, g))
                case Recover(generation=g, checkpoint=n):
                    assert n == (
                        max(self.coordinator.completed) if self.coordinator.completed else None
                    )
                    self.write(Recovered(g, n))
                    self.restore(g, n)
                case Discard() | Halt():
                    pass

    def check_cut(self, n: int) -> None:
        """Completed `n`: state plus recorded ranges are the records before its barriers."""
        state, offsets = self.cuts[n]
        assert offsets is not None, f"{n} completed before its channel state"
        named = set(state)
        for i, items in enumerate(self.channels):
            barrier = items.index(("b", n))
            named |= {(i, o) for o in range(offsets[i], barrier) if items[o][0] == "r"}
            before = {(i, o) for o in range(barrier) if items[o][0] == "r"}
            mine = {r for r in named if r[0] == i}
            assert mine == before, f"snapshot {n} is no consistent cut on channel {i}"
        initiator = SnapshotId.decode(n).initiator
        if initiator:  # started by source initiator - 1: cut on its channel
            assert self.cut_on[n] == initiator - 1, f"{n} cut on {self.cut_on[n]}"

    def ack(self, task: str, n: int) -> None:
        # Concurrent: in any id order, but each id once per subtask and generation.
        taken = self.taken.setdefault((self.generation, task), [])
        assert n not in taken, f"{task} took {n} twice"
        taken.append(n)
        self.acked.setdefault((self.generation, n), set()).add(task)
        self.write(Acked(n, self.generation, task))

    def source_reads_control(self, i: int, count: int) -> None:
        s = self.sources[i]
        for _ in range(count):
            if s.cursor >= len(self.control):
                return
            m = self.control[s.cursor]
            s.cursor += 1
            s.clock.observe(checkpoint_of(m))
            if m.generation != self.generation:  # type: ignore[union-attr]
                continue
            if isinstance(m, Triggered):
                s.triggered.append(m.checkpoint)
            elif isinstance(m, Completed | Aborted):
                # As the runtime does: a trigger still queued is stale now.
                if m.checkpoint in s.triggered:
                    s.triggered.remove(m.checkpoint)
                if isinstance(m, Completed):
                    s.initiation.on_complete(m.checkpoint)
                else:
                    s.initiation.on_abort(m.checkpoint)
            elif isinstance(m, Initiated):
                s.initiation.on_announced(m.checkpoint)

    def sum_reads(self, i: int) -> bool:
        if i in self.blocked or self.read[i] >= len(self.channels[i]):
            return False
        offset = self.read[i]
        kind, _ = self.channels[i][offset]
        if kind == "r":
            self.read[i] += 1
            [action] = self.aligner.handle(RecordArrived(CHANNELS[i], offset, self.generation))
            assert isinstance(action, Process | Drop)
            if isinstance(action, Process):
                assert (i, offset) not in self.processed
                self.processed.add((i, offset))
            return True
        return super().sum_reads(i)

    def run(self, actions: list[object]) -> None:
        for a in actions:
            match a:
                case Block(channel=c):
                    self.blocked.add(c.partition)
                case Unblock(channel=c):
                    self.blocked.discard(c.partition)
                case TakeSnapshot(checkpoint=n, recording=recording):
                    assert n not in self.cuts
                    self.cut_on[n] = None if a.cut_on is None else a.cut_on.partition
                    offsets = (
                        None
                        if recording
                        else {c.partition: o for c, o in a.channel_offsets.items()}
                    )
                    self.cuts[n] = (set(self.processed), offsets)
                    if not recording:
                        self.ack(SUM, n)
                case ChannelStateComplete(checkpoint=n):
                    state, _ = self.cuts[n]
                    self.cuts[n] = (state, {c.partition: o for c, o in a.channel_offsets.items()})
                    self.ack(SUM, n)
                case AbandonAlignment(checkpoint=n):
                    self.write(Declined(n, self.generation, SUM))
                case Drop() | Process():
                    pass

    @rule()
    def quiesce_and_complete_one_more(self) -> None:
        """No more requests: time passes, and a coordinator checkpoint completes."""
        self.drain()
        self.now += self.config.timeout + 1  # whatever is stuck times out
        self.execute(self.coordinator.handle(Tick(self.now)))
        self.drain()
        before = len(self.completions)
        self.now += self.config.interval
        self.execute(self.coordinator.handle(Tick(self.now)))
        self.drain()
        assert len(self.completions) > before, "no checkpoint completed: a deadlock"

    @invariant()
    def restore_point_is_the_largest_completed(self) -> None:
        completed = self.coordinator.completed
        assert completed == sorted(completed)
        assert len(self.coordinator.pending) <= self.config.max_in_flight
        if completed:
            assert self.coordinator.latest_completed == max(completed)


ConcurrentSnapshots.TestCase.settings = settings(
    max_examples=150, stateful_step_count=50, deadline=None
)
test_concurrent_snapshots_over_random_interleavings = ConcurrentSnapshots.TestCase
