"""Snapshots started anywhere, over random interleavings (pure: no Kafka, no clock).

A model job: source subtasks ``src-i`` (each a `SourceInitiation` with the
worker's `LamportClock`), each writing one FIFO channel into ``sum-0`` (an
`Aligner`, aligned or unaligned), the real `Coordinator`, and one control
topic every participant reads at its own pace. Hypothesis interleaves
coordinator ticks, sources starting snapshots on request, batches, control
reads, channel reads, lost workers and restarts of the coordinator, and
checks what the design promises (docs/internals/barriers.md, "Snapshot ids: Lamport
clocks, any initiator"):

* every snapshot id is started once, by one initiator, never reused (across
  recoveries and coordinator restarts);
* an id a source starts is larger than every id it has seen;
* every subtask takes its snapshots in increasing id order;
* a completed checkpoint was acked by every subtask in its generation, and
  completions come in increasing id order, so a recovery restores the
  completed checkpoint with the largest id;
* nothing deadlocks: once the sources stop starting snapshots, with time
  passing, a new coordinator checkpoint completes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kstream.protocol.barrier import (
    AbandonAlignment,
    Aligner,
    Alignment,
    BarrierArrived,
    Block,
    Channel,
    ChannelStateComplete,
    CheckpointAborted,
    Drop,
    Process,
    RecordArrived,
    TakeSnapshot,
    Unblock,
)
from kstream.protocol.coordination import (
    Abort,
    AckReceived,
    Command,
    Complete,
    CoordinatorConfig,
    DeclineReceived,
    Discard,
    Fail,
    Halt,
    InitiatedReceived,
    Recover,
    Tick,
    Trigger,
    WorkerLost,
)
from kstream.protocol.coordinator import Coordinator, replay
from kstream.protocol.initiation import Decline, Ignore, SourceInitiation, Take
from kstream.protocol.messages import (
    Aborted,
    Acked,
    Completed,
    ControlMessage,
    Declined,
    Initiated,
    Recovered,
    Triggered,
    checkpoint_of,
)
from kstream.protocol.snapshot_id import LamportClock, source_initiator

SOURCES = 2
SOURCE_TASKS = [f"src-{i}" for i in range(SOURCES)]
SUM = "sum-0"
TASKS = frozenset([*SOURCE_TASKS, SUM])
CHANNELS = [Channel("s1", i) for i in range(SOURCES)]


@dataclass
class Source:
    """One source subtask and the worker state around it."""

    index: int
    initiation: SourceInitiation
    clock: LamportClock
    cursor: int = 0
    triggered: list[int] = field(default_factory=list)


class SnapshotIds(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.control: list[ControlMessage] = []
        self.coordinator_cursor = 0
        self.generation = 0
        #: Every id ever started (coordinator triggers that are not relays, initiations).
        self.started: set[int] = set()
        #: Ids completed, in completion order, over the whole run.
        self.completions: list[int] = []
        #: Per generation and subtask, the ids it took, in order.
        self.taken: dict[tuple[int, str], list[int]] = {}
        self.acked: dict[tuple[int, int], set[str]] = {}
        self.restarts = 0

    # -- set-up and recovery -------------------------------------------------

    @initialize(
        mode=st.sampled_from(list(Alignment)),
        max_in_flight=st.integers(1, 3),
        timeout=st.sampled_from([2.0, 10.0]),
    )
    def start(self, mode: Alignment, max_in_flight: int, timeout: float) -> None:
        self.mode = mode
        self.config = CoordinatorConfig(
            interval=1.0, timeout=timeout, max_in_flight=max_in_flight, retained=2
        )
        self.coordinator = Coordinator(TASKS, self.config)
        self.execute(self.coordinator.start(self.now))

    def restore(self, generation: int, checkpoint: int | None) -> None:
        """Every subtask restores `checkpoint` in `generation` (a worker reads the topic)."""
        self.generation = generation
        last = checkpoint or 0
        self.sources = []
        for i in range(SOURCES):
            clock = LamportClock()
            for m in self.control:
                clock.observe(checkpoint_of(m))
            initiation = SourceInitiation(source_initiator(i), last)
            self.sources.append(Source(i, initiation, clock, cursor=len(self.control)))
        self.channels: list[list[tuple[str, int]]] = [[] for _ in CHANNELS]
        self.read = [0] * SOURCES
        self.blocked: set[int] = set()
        self.aligner = Aligner.over(CHANNELS, generation, last, self.mode)
        self.sum_cursor = len(self.control)

    def write(self, message: ControlMessage) -> None:
        self.control.append(message)

    def execute(self, commands: list[Command]) -> None:
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
                    assert not self.completions or n > self.completions[-1]
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
                case Discard() | Halt() | Fail():
                    pass

    def ack(self, task: str, n: int) -> None:
        key = (self.generation, task)
        taken = self.taken.setdefault(key, [])
        assert not taken or n > taken[-1], f"{task} took {n} after {taken[-1]}"
        taken.append(n)
        self.acked.setdefault((self.generation, n), set()).add(task)
        self.write(Acked(n, self.generation, task))

    # -- the coordinator ----------------------------------------------------

    @rule(dt=st.sampled_from([0.0, 0.5, 1.0, 3.0]))
    def tick(self, dt: float) -> None:
        self.now += dt
        self.execute(self.coordinator.handle(Tick(self.now)))

    @rule(count=st.integers(1, 5))
    def coordinator_reads(self, count: int) -> None:
        for _ in range(count):
            if self.coordinator_cursor >= len(self.control):
                return
            m = self.control[self.coordinator_cursor]
            self.coordinator_cursor += 1
            match m:
                case Acked():
                    event = AckReceived(m.checkpoint, m.generation, m.task, self.now)
                    self.execute(self.coordinator.handle(event))
                case Declined():
                    event2 = DeclineReceived(m.checkpoint, m.generation, m.task, "", self.now)
                    self.execute(self.coordinator.handle(event2))
                case Initiated():
                    event3 = InitiatedReceived(m.checkpoint, m.generation, m.task, self.now)
                    self.execute(self.coordinator.handle(event3))
                case _:
                    pass

    @precondition(lambda self: self.restarts < 3)
    @rule()
    def lose_a_worker(self) -> None:
        self.restarts += 1
        self.execute(self.coordinator.handle(WorkerLost("w0", "killed", self.now)))

    @precondition(lambda self: self.restarts < 3)
    @rule()
    def restart_the_coordinator(self) -> None:
        """A new runner: its history is the control topic."""
        self.restarts += 1
        history = replay(self.control, self.config.retained)
        self.coordinator = Coordinator(TASKS, self.config, history)
        self.coordinator_cursor = len(self.control)
        self.execute(self.coordinator.start(self.now))

    # -- sources ------------------------------------------------------------

    @rule(i=st.integers(0, SOURCES - 1), count=st.integers(1, 5))
    def source_reads_control(self, i: int, count: int) -> None:
        s = self.sources[i]
        for _ in range(count):
            if s.cursor >= len(self.control):
                return
            m = self.control[s.cursor]
            s.cursor += 1
            s.clock.observe(checkpoint_of(m))
            if isinstance(m, Triggered) and m.generation == self.generation:
                s.triggered.append(m.checkpoint)
            elif isinstance(m, Completed) and m.generation == self.generation:
                s.initiation.on_complete(m.checkpoint)

    @rule(i=st.integers(0, SOURCES - 1))
    def source_requests(self, i: int) -> None:
        self.sources[i].initiation.request()

    @rule(i=st.integers(0, SOURCES - 1), records=st.integers(0, 2))
    def source_batch(self, i: int, records: int) -> None:
        """Between two batches: triggered snapshots, then its own; then a batch."""
        s, task = self.sources[i], SOURCE_TASKS[i]
        while s.triggered:
            n = s.triggered.pop(0)
            match s.initiation.on_trigger(n):
                case Take():
                    self.channels[i].append(("b", n))
                    self.ack(task, n)
                case Decline():
                    self.write(Declined(n, self.generation, task))
                case Ignore():
                    pass
        seen = s.clock.seen
        own = s.initiation.start(self.now, s.clock)
        if own is not None:
            assert own > seen, "an initiated id must exceed every id its source saw"
            assert own not in self.started, f"id {own} reused"
            self.started.add(own)
            self.write(Initiated(own, self.generation, task))
            self.channels[i].append(("b", own))
            self.ack(task, own)
        self.channels[i] += [("r", 0)] * records

    # -- the downstream subtask ----------------------------------------------

    @rule(count=st.integers(1, 5))
    def sum_reads_control(self, count: int) -> None:
        for _ in range(count):
            if self.sum_cursor >= len(self.control):
                return
            m = self.control[self.sum_cursor]
            self.sum_cursor += 1
            if isinstance(m, Aborted) and m.generation == self.generation:
                self.run(self.aligner.handle(CheckpointAborted(m.checkpoint)))

    @rule(i=st.integers(0, SOURCES - 1))
    def sum_reads_channel(self, i: int) -> None:
        self.sum_reads(i)

    def sum_reads(self, i: int) -> bool:
        if i in self.blocked or self.read[i] >= len(self.channels[i]):
            return False
        offset = self.read[i]
        kind, n = self.channels[i][offset]
        self.read[i] += 1
        if kind == "r":
            [action] = self.aligner.handle(RecordArrived(CHANNELS[i], offset, self.generation))
            assert isinstance(action, Process | Drop)
            return True
        positions = {c: self.read[j] for j, c in enumerate(CHANNELS)}
        self.run(
            self.aligner.handle(BarrierArrived(CHANNELS[i], offset, n, self.generation, positions))
        )
        return True

    def run(self, actions: list[object]) -> None:
        for a in actions:
            match a:
                case Block(channel=c):
                    self.blocked.add(c.partition)
                case Unblock(channel=c):
                    self.blocked.discard(c.partition)
                case TakeSnapshot(checkpoint=n, recording=recording):
                    if not recording:
                        self.ack(SUM, n)
                    else:
                        taken = self.taken.setdefault((self.generation, SUM), [])
                        assert not taken or n > taken[-1]
                case ChannelStateComplete(checkpoint=n):
                    self.acked.setdefault((self.generation, n), set()).add(SUM)
                    self.write(Acked(n, self.generation, SUM))
                case AbandonAlignment(checkpoint=n):
                    self.write(Declined(n, self.generation, SUM))
                case Drop() | Process():
                    pass

    # -- no deadlock ---------------------------------------------------------

    def drain(self) -> None:
        """Let every participant read everything there is, until nothing moves."""
        moved = True
        while moved:
            before = (len(self.control), tuple(map(len, self.channels)), tuple(self.read))
            self.coordinator_reads(len(self.control))
            self.sum_reads_control(len(self.control))
            for i in range(SOURCES):
                self.source_reads_control(i, len(self.control))
                self.source_batch(i, 0)
                while self.sum_reads(i):
                    pass
            after = (len(self.control), tuple(map(len, self.channels)), tuple(self.read))
            moved = after != before

    @rule()
    def quiesce_and_complete_one_more(self) -> None:
        """No more requests: time passes, and a coordinator checkpoint completes."""
        self.drain()  # pending requests are served here too
        self.now += self.config.timeout + 1  # whatever is stuck times out
        self.execute(self.coordinator.handle(Tick(self.now)))
        self.drain()
        before = len(self.completions)
        self.now += self.config.interval
        self.execute(self.coordinator.handle(Tick(self.now)))
        self.drain()
        assert len(self.completions) > before, "no checkpoint completed: a deadlock"
        assert self.coordinator.latest_completed == self.completions[-1]

    @invariant()
    def restore_point_is_the_largest_completed(self) -> None:
        completed = self.coordinator.completed
        assert completed == sorted(completed)
        assert len(self.coordinator.pending) <= self.config.max_in_flight


SnapshotIds.TestCase.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)
test_snapshot_ids_over_random_interleavings = SnapshotIds.TestCase
