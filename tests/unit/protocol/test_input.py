"""The input processor (`kstream.protocol.input.InputProcessor`) on lists of items.

Example tests give the exact outputs of each rule of the module's tables; the
property test drives random batches (generations, barriers, replay windows,
malformed items), aborts between parts and between batches, alignment
timeouts and flow-control pauses through the processor and through a
reference that hands every record to `Aligner.handle`, and requires the same
outputs. Its self-check shows the comparison catches a fast path that misses a
change of the aligner's open generation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.protocol.barrier import (
    NO_GENERATION,
    Aligner,
    Alignment,
    Channel,
    Event,
    Replay,
    TakeSnapshot,
)
from kstream.protocol.input import (
    BARRIER,
    DATA,
    HOLD_BYTES,
    ITEM_OVERHEAD,
    MALFORMED,
    TIMED,
    Abandon,
    BatchCounts,
    ChannelItem,
    Hold,
    InputProcessor,
    Output,
    Pause,
    Resume,
    Snapshot,
    StoreHeld,
)

GEN = 7
OLD = GEN - 1

C0 = Channel("kstream.j.s1", 0)
C1 = Channel("kstream.j.s1", 1)
C2 = Channel("kstream.j.s1", 2)
CHANNELS = (C0, C1, C2)


def item(kind: int, channel: Channel, offset: int, gen: int = GEN, n: int = 0) -> ChannelItem:
    return ChannelItem(kind, channel, offset, gen, n, b"", None)


def data(channel: Channel, offset: int, gen: int = GEN) -> ChannelItem:
    return item(DATA, channel, offset, gen)


def barrier(channel: Channel, offset: int, n: int, gen: int = GEN) -> ChannelItem:
    return item(BARRIER, channel, offset, gen, n)


class CountingAligner(Aligner):
    """An aligner that keeps every event it is handed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[Event] = []

    def handle(self, event: Event) -> list[Any]:
        self.events.append(event)
        return super().handle(event)


def processor(
    channels: tuple[Channel, ...] = (C0, C1),
    *,
    last: int = 0,
    mode: Alignment = Alignment.ALIGNED,
    replay: dict[Channel, tuple[Replay, ...]] | None = None,
    timeout: float | None = None,
    concurrent: bool = False,
    kind: type[InputProcessor] = InputProcessor,
    hold_bytes: int = 0,
) -> InputProcessor:
    """A processor over `channels`; by default one that holds nothing (pauses a
    blocked channel at its barrier, the simplest to read)."""
    aligner = CountingAligner.over(channels, GEN, last, mode, replay or {}, concurrent=concurrent)
    return kind(aligner, dict.fromkeys(channels, 0), timeout, hold_bytes)


def events(p: InputProcessor) -> list[Event]:
    assert isinstance(p.aligner, CountingAligner)
    return p.aligner.events


def run(
    p: InputProcessor, items: list[ChannelItem], now: float = 0.0
) -> tuple[list[list[Output]], BatchCounts]:
    """Every part of a batch, and the counts over all of them."""
    parts = []
    out, counts = p.batch(items, now)
    replayed, dropped = counts.replayed, counts.dropped
    while out:
        parts.append(out)
        out, counts = p.more(now)
        replayed += counts.replayed
        dropped += counts.dropped
    return parts, BatchCounts(replayed, dropped)


def flat(parts: list[list[Output]]) -> list[Output]:
    return [x for part in parts for x in part]


# -- example tests ----------------------------------------------------------------


def test_current_generation_records_are_delivered_in_order_without_aligner_events() -> None:
    p = processor()
    items = [data(C0, 0), item(TIMED, C1, 0), data(C0, 1), data(C1, 1), item(TIMED, C0, 2)]
    parts, counts = run(p, items)
    assert parts == [items]
    assert all(x is y for x, y in zip(parts[0], items, strict=True))  # the items themselves
    assert counts == BatchCounts()
    assert events(p) == []
    assert p.positions == {C0: 3, C1: 2}


def test_an_old_generation_record_is_dropped_and_counted() -> None:
    p = processor()
    parts, counts = run(p, [data(C0, 0, OLD), data(C0, 1, GEN + 1), data(C1, 0)])
    assert flat(parts) == [data(C1, 0)]
    assert counts == BatchCounts(dropped=2)
    # Read past, not processed: a restore must not start before them.
    assert p.positions == {C0: 2, C1: 1}


def test_a_replay_window_record_is_delivered_and_counted_as_replayed() -> None:
    p = processor(last=3, replay={C0: (Replay(10, OLD),)})
    inside, after = data(C0, 4, OLD), data(C0, 10, OLD)
    parts, counts = run(p, [inside, after, data(C1, 0, OLD)])
    assert flat(parts) == [inside]
    assert counts == BatchCounts(replayed=1, dropped=2)


def test_a_barrier_blocks_its_channel_for_the_rest_of_the_batch() -> None:
    p = processor()
    b = barrier(C0, 0, 1)
    parts, counts = run(p, [b, data(C0, 1), data(C1, 0), data(C0, 2)])
    assert parts == [[b, Hold(C0, 1), Pause(C0, 1), data(C1, 0)]]
    assert counts == BatchCounts(dropped=2)
    assert p.blocked == {C0: 1}


def test_records_after_a_resume_in_the_same_batch_are_skipped() -> None:
    p = processor()
    b0, b1 = barrier(C0, 0, 1), barrier(C1, 0, 1)
    out, counts = p.batch([b0, data(C0, 1), b1, data(C0, 2), data(C1, 1)], 1.0)
    # A part ends before a barrier: what came before it is carried out first.
    assert out == [b0, Hold(C0, 1), Pause(C0, 1)]
    assert counts == BatchCounts(dropped=1)
    out, counts = p.more(1.5)
    take = TakeSnapshot(1, {C0: 1, C1: 1})
    # C0's record after the resume is a stale copy, fetched again from offset 1.
    assert out == [b1, Snapshot(take, 500.0), Resume(C0, 1), data(C1, 1)]
    assert counts == BatchCounts()
    assert p.more(2.0) == ([], BatchCounts())
    assert p.positions == {C0: 1, C1: 2}
    assert p.blocked == {}


@pytest.mark.parametrize("kind", [DATA, TIMED], ids=["plain", "timed"])
def test_plain_and_timed_records_follow_one_rule(kind: int) -> None:
    p = processor(last=3, replay={C1: (Replay(5, OLD),)})
    rec = [item(kind, C0, 0), item(kind, C1, 0, OLD), item(kind, C1, 7, OLD)]
    b = barrier(C0, 1, 4)
    blocked, free = item(kind, C0, 2), item(kind, C1, 8)
    parts, counts = run(p, [*rec, b, blocked, free])
    assert parts == [rec[:2], [b, Hold(C0, 4), Pause(C0, 4), free]]
    assert counts == BatchCounts(replayed=1, dropped=2)
    # The fast path for the first, the aligner for every other record but the
    # blocked channel's (dropped here, re-read after the seek).
    assert [type(e).__name__ for e in events(p)] == [
        "RecordArrived",
        "RecordArrived",
        "BarrierArrived",
        "RecordArrived",
    ]


def test_a_malformed_item_is_delivered_for_the_error_policy() -> None:
    p = processor()
    bad = item(MALFORMED, C1, 0, 0)
    b = barrier(C1, 1, 1)
    # On a blocked channel it waits like any other item: it is read again
    # after the seek (or handed back from the hold), and delivered once.
    late = item(MALFORMED, C1, 2, 0)
    parts, counts = run(p, [bad, b, late, item(9, C0, 0)])
    assert parts == [[bad], [b, Hold(C1, 1), Pause(C1, 1)]]
    assert counts == BatchCounts(dropped=1)
    assert [type(e).__name__ for e in events(p)] == ["BarrierArrived"]
    # An item of an unknown kind moves its channel's position on, nothing else.
    assert p.positions == {C0: 1, C1: 2}


def test_an_unblock_while_flow_is_paused_waits_for_the_resume() -> None:
    p = processor()
    run(p, [barrier(C0, 0, 1)])
    p.flow_paused()
    parts, _ = run(p, [barrier(C1, 0, 1)])
    assert parts == [[barrier(C1, 0, 1), Snapshot(TakeSnapshot(1, {C0: 1, C1: 1}), 0.0)]]
    assert p.blocked == {C0: 1}  # flow control's resume leaves it paused
    assert p.deferred == {C0}
    assert p.positions[C0] == 1
    # Deferred, it is not seeked back yet: what the next batch holds of it is stale.
    parts, counts = run(p, [data(C0, 5), data(C1, 1)])
    assert parts == [[data(C1, 1)]]
    assert counts == BatchCounts(dropped=1)
    assert p.flow_resumed() == [Resume(C0, 1)]
    assert p.blocked == {}
    assert p.deferred == frozenset()
    assert run(p, [data(C0, 1)])[0] == [[data(C0, 1)]]


def test_the_alignment_timeout_switches_to_unaligned_on_tick() -> None:
    p = processor(timeout=2.0)
    assert p.tick(9.0) == []
    run(p, [data(C1, 0), barrier(C0, 0, 1)], now=10.0)
    assert p.tick(11.9) == []
    take = TakeSnapshot(1, {C0: 1, C1: 1}, frozenset({C1}))
    assert p.tick(12.5) == [Snapshot(take, 2500.0), Resume(C0, 1)]
    assert p.tick(20.0) == []
    # C1 records its channel state up to its barrier, from the first barrier on.
    parts, _ = run(p, [data(C1, 1), barrier(C1, 2, 1)], now=13.0)
    done = parts[1][1]
    assert isinstance(done, StoreHeld)
    assert done.complete.checkpoint == 1
    assert done.complete.replay == {C1: (Replay(2, GEN),)}
    assert done.recording_ms == pytest.approx(3000.0)


def test_an_abort_between_parts_reaches_the_aligner_before_the_next_barrier() -> None:
    p = processor((C0, C1, C2))
    out, _ = p.batch([barrier(C0, 0, 1), data(C1, 0), barrier(C2, 0, 5), data(C0, 1)], 0.0)
    assert out == [barrier(C0, 0, 1), Hold(C0, 1), Pause(C0, 1), data(C1, 0)]
    # A sink waiting in `data(C1, 0)` serves the abort of checkpoint 1.
    assert p.abort(1) == [Abandon(1), Resume(C0, 1)]
    out, counts = p.more(0.0)
    # C0 was seeked back: its record in this batch is a stale copy.
    assert out == [barrier(C2, 0, 5), Hold(C2, 5), Pause(C2, 5)]
    assert counts == BatchCounts()
    assert p.more(0.0)[0] == []


def test_a_barrier_of_a_checkpoint_aborted_in_an_earlier_part_is_dropped() -> None:
    p = processor()
    out, _ = p.batch([data(C0, 0), barrier(C0, 1, 2)], 0.0)
    assert out == [data(C0, 0)]
    assert p.abort(2) == []
    assert p.more(0.0) == ([barrier(C0, 1, 2)], BatchCounts(dropped=1))
    assert p.blocked == {}


# -- holding a blocked channel ----------------------------------------------------


def test_a_blocked_channel_is_held_and_handed_back_without_a_seek() -> None:
    p = processor(hold_bytes=HOLD_BYTES)
    b0, b1 = barrier(C0, 0, 1), barrier(C1, 0, 1)
    later = [data(C0, 1), item(MALFORMED, C0, 2, 0), barrier(C0, 3, 2)]
    out, counts = p.batch([b0, *later, data(C1, 0)], 1.0)
    # Held, not dropped: no pause, nothing for the aligner.
    assert out == [b0, Hold(C0, 1), data(C1, 0)]
    assert counts == BatchCounts()
    assert p.blocked == {C0: 1}
    assert p.paused == frozenset()
    assert p.more(1.0)[0] == []
    out, _ = p.batch([b1, data(C1, 1)], 1.5)
    take = TakeSnapshot(1, {C0: 1, C1: 1})
    # The part ends at the unblock; C0's held items start the next, in order,
    # before the rest of the batch (and its barrier of checkpoint 2 blocks it again).
    assert out == [b1, Snapshot(take, 500.0)]
    assert p.pending
    out, _ = p.more(1.5)
    assert out == [*later[:2]]
    out, _ = p.more(1.5)
    assert out == [later[2], Hold(C0, 2), data(C1, 1)]
    assert p.more(1.5)[0] == []
    assert not p.pending
    assert p.positions == {C0: 4, C1: 2}
    assert p.blocked == {C0: 4}


def test_a_hold_that_overflows_pauses_and_resumes_at_the_first_dropped_offset() -> None:
    # Room for two items of this size.
    value = b"x" * 100
    p = processor(hold_bytes=2 * (len(value) + ITEM_OVERHEAD))

    def rec(c: Channel, o: int) -> ChannelItem:
        return ChannelItem(DATA, c, o, GEN, 0, value, None)

    b0 = barrier(C0, 0, 1)
    parts, counts = run(p, [b0, rec(C0, 1), rec(C0, 2), rec(C0, 3), rec(C0, 4)], 1.0)
    assert parts == [[b0, Hold(C0, 1), Pause(C0, 1)]]
    assert counts == BatchCounts(dropped=2)
    assert p.paused == {C0}
    # Fetched before the pause took hold: dropped too.
    assert run(p, [rec(C0, 5)])[1] == BatchCounts(dropped=1)
    b1 = barrier(C1, 0, 1)
    out, _ = p.batch([b1, rec(C0, 3), rec(C1, 1)], 2.0)
    assert out == [b1, Snapshot(TakeSnapshot(1, {C0: 1, C1: 1}), 1000.0), Resume(C0, 3)]
    # The held two, then the rest: C0 from 3 on is a stale copy, read again after the seek.
    assert p.more(2.0) == ([rec(C0, 1), rec(C0, 2), rec(C1, 1)], BatchCounts())
    assert p.paused == frozenset()
    assert run(p, [rec(C0, 3)])[0] == [[rec(C0, 3)]]


def test_items_handed_back_between_batches_start_the_next_one() -> None:
    p = processor(hold_bytes=HOLD_BYTES)
    run(p, [barrier(C0, 0, 1), data(C0, 1)])
    # An abort between batches unblocks C0: nothing to resume, its item comes next.
    assert p.abort(1) == [Abandon(1)]
    assert p.pending
    assert run(p, [data(C0, 2)])[0] == [[data(C0, 1), data(C0, 2)]]
    assert not p.pending


def test_a_deferred_channel_holds_until_flow_control_resumes() -> None:
    p = processor(hold_bytes=HOLD_BYTES)
    run(p, [barrier(C0, 0, 1), data(C0, 1)])
    p.flow_paused()
    run(p, [barrier(C1, 0, 1)])
    assert p.deferred == {C0}
    # Still blocked: what comes of it is held behind its first held item.
    assert run(p, [data(C0, 2), data(C1, 1)])[0] == [[data(C1, 1)]]
    assert p.flow_resumed() == []
    assert p.pending
    assert run(p, [])[0] == [[data(C0, 1), data(C0, 2)]]


# -- the fast path against the aligner ----------------------------------------------


class EveryRecordToTheAligner(InputProcessor):
    """The reference: no fast path, every record is an event for the aligner."""

    def _open_generation(self) -> int:
        return NO_GENERATION


class StaleOpenGeneration(InputProcessor):
    """A broken fast path: the open generation as it was when the processor was made."""

    def __init__(self, aligner: Aligner, *args: Any) -> None:
        super().__init__(aligner, *args)
        self._stale = aligner.open_generation

    def _open_generation(self) -> int:
        return self._stale


@dataclass(frozen=True)
class Batch:
    #: (channel index, kind, generation, checkpoint) per item.
    items: list[tuple[int, int, int, int]]
    #: Per part, the checkpoint aborted once it is carried out (None: none).
    aborts: list[int | None]


@dataclass(frozen=True)
class Tick:
    seconds: float


@dataclass(frozen=True)
class Abort:
    checkpoint: int


@dataclass(frozen=True)
class Flow:
    paused: bool


KINDS = st.sampled_from([DATA, DATA, DATA, TIMED, BARRIER, BARRIER, MALFORMED])
ITEMS = st.lists(
    st.tuples(
        st.integers(0, 2),
        KINDS,
        st.sampled_from([GEN, GEN, GEN, OLD, GEN + 1]),
        st.integers(1, 6),
    ),
    max_size=12,
)
STEPS = st.lists(
    st.one_of(
        st.builds(Batch, ITEMS, st.lists(st.one_of(st.none(), st.integers(1, 6)), max_size=4)),
        st.builds(Tick, st.floats(0.0, 2.0)),
        st.builds(Abort, st.integers(1, 6)),
        st.builds(Flow, st.booleans()),
    ),
    max_size=14,
)
SETUPS = st.sampled_from(
    [
        (Alignment.ALIGNED, False, 0),
        (Alignment.ALIGNED, False, 2),
        (Alignment.ALIGNED, False, 1000),
        (Alignment.UNALIGNED, False, 0),
        (Alignment.UNALIGNED, False, 1000),
        (Alignment.UNALIGNED, True, 2),
    ]
)


def compare(
    kind: type[InputProcessor], setup: tuple[Alignment, bool, int], steps: list[Any]
) -> None:
    """Drive `kind` and the reference side by side; every output must be equal."""
    mode, concurrent, hold = setup

    def make(k: type[InputProcessor]) -> InputProcessor:
        aligner = Aligner.over(
            CHANNELS, GEN, 1, mode, {C0: (Replay(6, OLD),)}, concurrent=concurrent
        )
        # `hold` items of an empty value.
        return k(aligner, dict.fromkeys(CHANNELS, 0), 1.0, hold * ITEM_OVERHEAD)

    p, ref = make(kind), make(EveryRecordToTheAligner)
    now = 0.0
    offsets = dict.fromkeys(CHANNELS, 0)
    for i, step in enumerate(steps):
        match step:
            case Batch(items=specs, aborts=aborts):
                items = []
                for c, k, gen, n in specs:
                    ch = CHANNELS[c]
                    items.append(item(k, ch, offsets[ch], 0 if k == MALFORMED else gen, n))
                    offsets[ch] += 1
                got, want = p.batch(items, now), ref.batch(items, now)
                part = 0
                while True:
                    assert got == want, (i, step, part)
                    if not got[0]:
                        break
                    n = aborts[part] if part < len(aborts) else None
                    if n is not None:
                        assert p.abort(n) == ref.abort(n), (i, step, part, n)
                    part += 1
                    got, want = p.more(now), ref.more(now)
            case Tick(seconds=dt):
                now += dt
                assert p.tick(now) == ref.tick(now), (i, step)
            case Abort(checkpoint=n):
                assert p.abort(n) == ref.abort(n), (i, step)
            case Flow(paused=True):
                p.flow_paused()
                ref.flow_paused()
            case Flow(paused=False):
                assert p.flow_resumed() == ref.flow_resumed(), (i, step)
        assert p.positions == ref.positions, (i, step)
        assert p.blocked == ref.blocked, (i, step)


# One failure is enough: the self-check expects the first one raised as it is.
@settings(max_examples=300, deadline=None, report_multiple_bugs=False)
@given(SETUPS, STEPS)
def agree(kind: type[InputProcessor], setup: tuple[Alignment, bool, int], steps: list[Any]) -> None:
    compare(kind, setup, steps)


def test_fails_when_the_fast_path_and_the_aligner_disagree() -> None:
    # The self-check: a fast path that misses a change of the open generation
    # (the aligner blocking a channel, then opening again) is caught.
    with pytest.raises(AssertionError):
        agree(StaleOpenGeneration)
    agree(InputProcessor)


# -- against a consumer: every record once, every snapshot a cut -------------------


@dataclass(frozen=True)
class Fetch:
    #: Channel indices, one per item asked for (a paused or read-out channel gives none).
    picks: list[int]
    #: Per part, the checkpoint aborted once it is carried out (None: none).
    aborts: list[int | None]


FETCHES = st.lists(
    st.one_of(
        st.builds(
            Fetch,
            st.lists(st.integers(0, 2), max_size=10),
            st.lists(st.one_of(st.none(), st.integers(1, 3)), max_size=3),
        ),
        st.builds(Abort, st.integers(1, 3)),
        st.builds(Flow, st.booleans()),
    ),
    max_size=25,
)
#: Per channel, the data records before each of barriers 1..3 and after the last.
LOGS = st.lists(st.lists(st.integers(0, 4), min_size=4, max_size=4), min_size=3, max_size=3)
VALUE = b"v" * 10
#: No hold, room for one, two and five items, and the default.
HOLDS = st.sampled_from([0, 1, 2, 5, None])


class Consumer:
    """A consumer of FIFO channel logs: positions, pause, resume and seek."""

    def __init__(self, logs: list[list[ChannelItem]]) -> None:
        self.logs = dict(zip(CHANNELS, logs, strict=True))
        self.next = dict.fromkeys(CHANNELS, 0)
        self.paused: set[Channel] = set()

    def fetch(self, picks: list[int]) -> list[ChannelItem]:
        out = []
        for i in picks:
            c = CHANNELS[i]
            if c not in self.paused and self.next[c] < len(self.logs[c]):
                out.append(self.logs[c][self.next[c]])
                self.next[c] += 1
        return out

    def done(self) -> bool:
        return all(self.next[c] == len(self.logs[c]) for c in CHANNELS)


def channel_logs(counts: list[list[int]]) -> list[list[ChannelItem]]:
    logs = []
    for c, per_epoch in zip(CHANNELS, counts, strict=True):
        log: list[ChannelItem] = []
        for n, k in enumerate(per_epoch):
            if n:
                log.append(barrier(c, len(log), n))
            for _ in range(k):
                log.append(ChannelItem(DATA, c, len(log), GEN, 0, VALUE, None))
        logs.append(log)
    return logs


def drive(
    counts: list[list[int]],
    hold: int | None,
    steps: list[Any],
    kind: type[InputProcessor] = InputProcessor,
) -> None:
    """Run the processor against a consumer; every data record must be delivered
    once, in order, and every snapshot must cut each channel at its barrier."""
    logs = channel_logs(counts)
    consumer = Consumer(logs)
    hold_bytes = HOLD_BYTES if hold is None else hold * (len(VALUE) + ITEM_OVERHEAD)
    p = processor(CHANNELS, hold_bytes=hold_bytes, kind=kind)
    delivered: dict[Channel, list[int]] = {c: [] for c in CHANNELS}
    flow_paused = False

    def carry_out(out: list[Any]) -> None:
        for x in out:
            match x:
                case ChannelItem(kind=k, channel=c, offset=o) if k == DATA:
                    delivered[c].append(o)
                case Pause(channel=c):
                    assert c in p.blocked
                    consumer.paused.add(c)
                case Resume(channel=c, offset=o):
                    assert c in consumer.paused
                    consumer.paused.discard(c)
                    consumer.next[c] = o
                case Snapshot(take=take):
                    for c, after in take.channel_offsets.items():
                        # A cut: exactly the data records before the barrier.
                        want = [x.offset for x in logs_of[c][:after] if x.kind == DATA]
                        assert delivered[c] == want, (take, c)

    logs_of = dict(zip(CHANNELS, logs, strict=True))

    def one_batch(picks: list[int], aborts: list[int | None]) -> None:
        items = [] if flow_paused else consumer.fetch(picks)
        out, _ = p.batch(items, 0.0)
        part = 0
        while out:
            carry_out(out)
            n = aborts[part] if part < len(aborts) else None
            if n is not None:
                carry_out(p.abort(n))
            part += 1
            out, _ = p.more(0.0)

    for step in steps:
        match step:
            case Fetch(picks=picks, aborts=aborts):
                one_batch(picks, aborts)
            case Abort(checkpoint=n):
                carry_out(p.abort(n))
            case Flow(paused=True):
                p.flow_paused()
                flow_paused = True
            case Flow(paused=False):
                carry_out(p.flow_resumed())
                flow_paused = False
    if flow_paused:
        carry_out(p.flow_resumed())
        flow_paused = False
    for _ in range(200):
        if consumer.done() and not p.pending:
            break
        one_batch([0, 1, 2] * 4, [])
    assert consumer.done()
    assert not p.pending
    for c in CHANNELS:
        assert delivered[c] == [x.offset for x in logs_of[c] if x.kind == DATA], c
    assert p.blocked == {}
    assert consumer.paused == set()


class LastHeldFirst(InputProcessor):
    """A broken hold: hands a channel's held items back newest first."""

    def _release(self, c: Channel) -> Resume | None:
        self._hold[c].reverse()
        return super()._release(c)


@settings(max_examples=400, deadline=None, report_multiple_bugs=False)
@given(LOGS, HOLDS, FETCHES)
def delivers_once(
    kind: type[InputProcessor], counts: list[list[int]], hold: int | None, steps: list[Any]
) -> None:
    drive(counts, hold, steps, kind)


def test_every_record_is_delivered_once_and_every_snapshot_is_a_cut() -> None:
    # The self-check: a hold that reorders a channel is caught.
    with pytest.raises(AssertionError):
        delivers_once(LastHeldFirst)
    delivers_once(InputProcessor)
