"""Flow control's decision (`kstream.protocol.flow.FlowGate`): examples, then properties
over random sequences of probes and ticks."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kstream.errors import ConfigurationError
from kstream.protocol.barrier import Channel
from kstream.protocol.flow import (
    FlowAction,
    FlowConfig,
    FlowEvent,
    FlowGate,
    Opened,
    Pause,
    Probed,
    Resume,
    Tick,
    Wrote,
    channel_lags,
    still_drained,
)

C0 = Channel("kstream.j.s1", 0)
C1 = Channel("kstream.j.s1", 1)
CHANNELS = (C0, C1)


def probe(at: float, lag0: int, lag1: int = 0) -> Probed:
    """A probe at `at` where channel i's reader is `lag_i` records behind an end of 1000."""
    return Probed(at, {C0: 1000, C1: 1000}, {C0: 1000 - lag0, C1: 1000 - lag1})


# -- examples ---------------------------------------------------------------------


def test_pauses_only_above_the_bound_and_names_the_channel() -> None:
    gate = FlowGate(FlowConfig(max_lag=10))
    assert gate.handle(probe(1.0, 10, 3)) == []
    assert not gate.paused
    assert gate.handle(probe(2.0, 4, 11)) == [Pause(C1, 11)]
    assert gate.paused


def test_resumes_at_half_the_bound_not_before() -> None:
    gate = FlowGate(FlowConfig(max_lag=10))
    gate.handle(probe(1.0, 50))
    assert gate.handle(probe(2.0, 6)) == []  # between the two marks: stays paused
    assert gate.handle(probe(3.0, 11)) == []  # a paused gate never pauses again
    assert gate.handle(probe(4.0, 5, 5)) == [Resume()]
    assert not gate.paused


def test_explicit_resume_lag() -> None:
    gate = FlowGate(FlowConfig(max_lag=10, resume_lag=0))
    gate.handle(probe(1.0, 11))
    assert gate.handle(probe(2.0, 1)) == []
    assert gate.handle(probe(3.0, 0)) == [Resume()]


def test_unknown_or_impossible_positions_count_as_no_lag() -> None:
    ends = {C0: 500, C1: 500}
    assert channel_lags(ends, {}) == {C0: 0, C1: 0}
    assert channel_lags(ends, {C0: 900, C1: -1001}) == {C0: 0, C1: 0}
    assert channel_lags(ends, {C0: 100}) == {C0: 400, C1: 0}
    gate = FlowGate(FlowConfig(max_lag=1))
    assert gate.handle(Probed(1.0, ends, {})) == []


def test_an_overtaken_probe_is_ignored() -> None:
    gate = FlowGate(FlowConfig(max_lag=10))
    gate.handle(probe(5.0, 50))
    assert gate.handle(probe(4.0, 0)) == []
    assert gate.paused
    assert gate.probed_at == 5.0


def test_stale_probes_resume_blind_and_fresh_ones_pause_again() -> None:
    gate = FlowGate(FlowConfig(max_lag=10, stale_after_s=2.0))
    gate.handle(probe(1.0, 50))
    assert gate.handle(Tick(3.0)) == []  # exactly at the limit: still trusted
    assert gate.handle(Tick(3.01)) == [Resume()]
    assert gate.handle(Tick(10.0)) == []
    assert gate.handle(probe(11.0, 50)) == [Pause(C0, 50)]


def test_a_gate_opens_paused_until_a_probe_says_otherwise() -> None:
    gate = FlowGate(FlowConfig(max_lag=10, stale_after_s=2.0))
    assert gate.handle(Opened(1.0)) == [Pause(None, 0)]
    assert gate.handle(Opened(1.5)) == []  # once only
    assert gate.handle(Tick(2.9)) == []
    assert gate.handle(probe(3.0, 5)) == [Resume()]


def test_a_gate_opened_paused_resumes_blind_if_no_probe_answers() -> None:
    gate = FlowGate(FlowConfig(max_lag=10, stale_after_s=2.0))
    gate.handle(Opened(1.0))
    assert gate.handle(Tick(3.0)) == []
    assert gate.handle(Tick(3.5)) == [Resume()]


def test_a_gate_opened_after_a_probe_follows_the_probe() -> None:
    gate = FlowGate(FlowConfig(max_lag=10))
    gate.handle(probe(1.0, 3))
    assert gate.handle(Opened(1.5)) == []
    assert not gate.paused


def test_what_the_writer_wrote_since_the_probe_began_counts() -> None:
    gate = FlowGate(FlowConfig(max_lag=10))
    # The probe began when the writer had written 100 records into C0 and saw lag 4.
    gate.handle(Probed(1.0, {C0: 104, C1: 0}, {C0: 100, C1: 0}, delivered={C0: 100, C1: 0}))
    assert gate.handle(Wrote({C0: 106, C1: 0})) == []  # 4 + 6
    assert gate.handle(Wrote({C0: 107, C1: 0})) == [Pause(C0, 11)]
    assert gate.handle(Wrote({C0: 200, C1: 0})) == []  # paused already
    # The next probe replaces the estimate; writes resume only by probes. It
    # counts what was not delivered when it began: 93 records still queued.
    assert gate.handle(Probed(2.0, {C0: 107, C1: 0}, {C0: 107, C1: 0}, {}, {C0: 107})) == []
    assert gate.handle(Probed(3.0, {C0: 200, C1: 0}, {C0: 200, C1: 0}, {}, {C0: 200})) == [Resume()]
    assert gate.handle(Wrote({C0: 210, C1: 0})) == []
    assert gate.handle(Wrote({C0: 211, C1: 0})) == [Pause(C0, 11)]


def test_writes_before_any_probe_count_from_zero() -> None:
    gate = FlowGate(FlowConfig(max_lag=3))
    assert gate.handle(Wrote({C0: 3})) == []
    assert gate.handle(Wrote({C0: 4})) == [Pause(C0, 4)]


def test_off_never_pauses() -> None:
    gate = FlowGate(FlowConfig(max_lag=0))
    assert gate.handle(Opened(0.5)) == []
    assert gate.handle(probe(1.0, 999)) == []
    assert gate.handle(Wrote({C0: 10**6})) == []
    assert gate.lags[C0] == 999  # still measured


def test_no_channels_never_pauses() -> None:
    gate = FlowGate(FlowConfig(max_lag=1))
    assert gate.handle(Probed(1.0, {}, {})) == []


@pytest.mark.parametrize(
    "kwargs",
    [{"max_lag": -1}, {"max_lag": 10, "resume_lag": 11}, {"max_lag": 10, "resume_lag": -1}],
)
def test_bad_bounds_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigurationError):
        FlowConfig(**kwargs)


def test_bad_staleness_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        FlowConfig(stale_after_s=0.0)


def test_reads_are_sized_by_the_room_left_and_the_fan_out() -> None:
    gate = FlowGate(FlowConfig(max_lag=10))
    gate.handle(probe(1.0, 0))
    assert gate.read_limit(1000) == 1000  # nothing read yet: no fan-out known
    # One turn read 1000 lines and wrote 8 channel records into C0 (most), 6 into C1.
    assert gate.handle(Wrote({C0: 8, C1: 6}, read=1000)) == []
    assert gate.fanout == pytest.approx(0.008)
    assert gate.read_limit(1000) == 125  # room 10 - 8 - 1 (the turn's partial batch) / 0.008
    gate.handle(Wrote({C0: 9, C1: 6}, read=1001))
    # No room left: still what fills one channel record (1 / 0.008 lines), not a
    # line whose record would hold 8 stream records.
    assert gate.read_limit(1000) == 125
    gate.handle(Probed(2.0, {C0: 1009, C1: 1006}, {C0: 1006, C1: 1006}, delivered={C0: 9, C1: 6}))
    assert gate.read_limit(1000) == 750  # C0 read: room 10 - 3 - 1 = 6, / 0.008
    assert gate.read_limit(100) == 100  # never more than asked
    # A turn of one record per channel says only that it is below one per line.
    gate.handle(Wrote({C0: 10, C1: 7}, read=1002))
    assert gate.fanout == pytest.approx(0.008)
    assert gate.read_limit(1000) == 625  # room 5 / 0.008


def test_the_fan_out_follows_a_rise_at_once_and_a_fall_slowly() -> None:
    gate = FlowGate(FlowConfig(max_lag=100))
    gate.handle(probe(1.0, 0))
    gate.handle(Wrote({C0: 2, C1: 0}, read=100))
    assert gate.fanout == pytest.approx(0.02)
    gate.handle(Wrote({C0: 52, C1: 0}, read=200))  # large records: 0.5 per input record
    assert gate.fanout == pytest.approx(0.5)
    gate.handle(Wrote({C0: 54, C1: 0}, read=300))
    assert gate.fanout == pytest.approx(0.45)
    gate.handle(Wrote({C0: 60, C1: 0}, read=300))  # barriers alone: nothing read, unchanged
    assert gate.fanout == pytest.approx(0.45)
    # Turns of one record per channel (a barrier's record made the estimate 2):
    # fewer than one record per input record of that turn, so the estimate
    # falls towards 1 / read, by at most the decay per turn.
    gate.handle(Wrote({C0: 62, C1: 0}, read=301))
    assert gate.fanout == pytest.approx(2.0)
    gate.handle(Wrote({C0: 63, C1: 1}, read=305))
    assert gate.fanout == pytest.approx(1.8)
    gate.handle(Wrote({C0: 64, C1: 2}, read=306))
    assert gate.fanout == pytest.approx(1.62)
    for i in range(60):
        gate.handle(Wrote({C0: 65 + i, C1: 2}, read=400 + 100 * i))
    assert gate.fanout == pytest.approx(0.01)  # there, and never below 1 / read


def test_a_turn_of_small_records_does_not_size_the_next_read_of_full_ones() -> None:
    """A middle stage reads channel records of any size: 500 stream records, or
    the few of a source's partial batch. A turn of 5 small ones wrote one record
    per channel; the next read, of full ones, must still be sized by their fan-out."""
    gate = FlowGate(FlowConfig(max_lag=10))
    gate.handle(probe(1.0, 0))
    gate.handle(Wrote({C0: 5, C1: 5}, read=10))  # full records: 0.5 per input record
    assert gate.fanout == pytest.approx(0.5)
    gate.handle(Wrote({C0: 6, C1: 6}, read=15))  # 5 small ones: one partial batch
    assert gate.fanout == pytest.approx(0.45)  # was 1 / 5 = 0.2
    # Room 10 - 6 - 1 = 3: 6 full records make 3 channel records, within the bound
    # (at 0.2 it would have read 15 and written 7.5 more).
    assert gate.read_limit(1000) == 6


def test_reads_are_not_sized_while_paused_blind_or_off() -> None:
    off = FlowGate(FlowConfig(max_lag=0))
    off.handle(Wrote({C0: 100}, read=1))
    assert off.read_limit(1000) == 1000
    gate = FlowGate(FlowConfig(max_lag=10, stale_after_s=1.0))
    gate.handle(probe(1.0, 0))
    assert gate.handle(Wrote({C0: 21, C1: 0}, read=10)) == [Pause(C0, 21)]
    assert gate.read_limit(1000) == 1000  # paused: what is read is what a pause leaves alone
    assert gate.handle(Tick(2.5)) == [Resume()]  # no probe for too long: resumes blind
    assert gate.read_limit(1000) == 1000  # the lags are not known: not sized by them
    # Known again, from a probe that began after those 21 were written.
    gate.handle(Probed(3.0, {C0: 1000, C1: 1000}, {C0: 1000, C1: 1000}, delivered={C0: 21, C1: 0}))
    assert gate.read_limit(1000) == 4  # room 10 - 1 / 2.1 per record


@settings(max_examples=300)
# Found by a run: at the bound, the least read (what fills one channel record at a
# fan-out of 0.4: three input records) ends in a partial batch as well, two records.
@example(max_lag=40, made=(0.0, 4.0), cap=10, asked=100, reader=[0], late=[0])
@given(
    max_lag=st.integers(1, 40),
    # Stream records one input record makes in each channel, and stream records
    # per channel record (small ones batched, or large ones one each).
    made=st.tuples(*[st.sampled_from([0.0, 0.5, 4.0, 8.0, 30.0])] * 2),
    cap=st.sampled_from([1, 10, 500]),
    asked=st.sampled_from([1, 100, 1000]),
    reader=st.lists(st.integers(0, 30), min_size=1, max_size=50),
    late=st.lists(st.integers(0, 20), min_size=1, max_size=7),
)
def test_a_writer_that_reads_as_allowed_stays_within_the_bound_plus_one_record(
    max_lag: int,
    made: tuple[float, float],
    cap: int,
    asked: int,
    reader: list[int],
    late: list[int],
) -> None:
    """Turns of one writer, each ending with a flush of its partial batches, against
    a reader that reads `reader[i]` channel records per turn, a probe answering every
    turn: every channel stays within the bound plus one input record's records and
    the turn's partial batch (`FlowGate.read_limit`'s contract), once the first
    reads (made before any fan-out is known) drained.

    The producer delivers late: when a probe reads the end offsets, up to
    `late[i]` of each channel's newest records are still in its queue (neither
    in the end offsets nor readable). What a channel holds counts them too:
    they land in it whatever the gate decides next."""
    gate = FlowGate(FlowConfig(max_lag=max_lag))
    written = dict.fromkeys(CHANNELS, 0)
    delivered = dict.fromkeys(CHANNELS, 0)
    positions = dict.fromkeys(CHANNELS, 0)
    read = 0
    gate.handle(Opened(0.0))
    gate.handle(Probed(0.0, dict(delivered), dict(positions), delivered=dict(delivered)))
    #: What the first informative reads wrote, before the gate knew the fan-out.
    blind = dict.fromkeys(CHANNELS, 0)
    one = max(math.ceil(m / cap) for m in made)  # channel records of one input record
    for turn, drained in enumerate(reader * 4):
        now = 0.1 * (turn + 1)
        learning = gate.fanout is None
        n = 0 if gate.paused else gate.read_limit(asked)
        for ch, m in zip(CHANNELS, made, strict=True):
            written[ch] += math.ceil(n * m / cap)
        read += n
        for ch in CHANNELS:
            held = written[ch] - positions[ch]
            if learning:
                blind[ch] = max(blind[ch], held)
            assert held <= max(max_lag + one + 1, blind[ch]), (ch, held, n, gate.fanout)
        gate.handle(Wrote(dict(written), read=read))
        for ch in CHANNELS:
            delivered[ch] = max(delivered[ch], written[ch] - late[turn % len(late)])
            positions[ch] = min(delivered[ch], positions[ch] + drained)
        gate.handle(Probed(now, dict(delivered), dict(positions), delivered=dict(delivered)))
        gate.handle(Tick(now))


# -- properties ---------------------------------------------------------------------

STALE = 1.0


@st.composite
def histories(draw: st.DrawFn) -> list[FlowEvent]:
    """Probes and ticks with a clock that mostly moves on; probes may arrive out of order."""
    events: list[FlowEvent] = []
    now = 0.0
    written = dict.fromkeys(CHANNELS, 0)
    if draw(st.booleans()):
        events.append(Opened(now))
    for _ in range(draw(st.integers(1, 40))):
        now += draw(st.sampled_from([0.0, 0.05, 0.1, 0.5, STALE, 3 * STALE]))
        kind = draw(st.sampled_from(["tick", "probe", "probe", "opened", "wrote", "wrote"]))
        if kind == "tick":
            events.append(Tick(now))
        elif kind == "wrote":
            for c in CHANNELS:
                written[c] += draw(st.integers(0, 15))
            events.append(Wrote(dict(written)))
        elif kind == "opened":
            events.append(Opened(now))
        else:
            at = now - draw(st.sampled_from([0.0, 0.0, 0.2, 2 * STALE]))
            ends = {c: draw(st.integers(0, 60)) for c in CHANNELS}
            positions = {
                c: p
                for c in CHANNELS
                if (p := draw(st.one_of(st.none(), st.integers(-2, 70)))) is not None
            }
            # Up to a few of the newest records may still be in the producer's queue.
            delivered = {
                c: max(0, n - draw(st.sampled_from([0, 0, 1, 5]))) for c, n in written.items()
            }
            events.append(Probed(at, ends, positions, delivered=delivered))
    return events


@settings(max_examples=500)
@given(
    history=histories(),
    max_lag=st.integers(0, 30),
    resume_frac=st.sampled_from([None, 0.0, 0.5, 1.0]),
)
def test_decisions_follow_the_rules(
    history: list[FlowEvent], max_lag: int, resume_frac: float | None
) -> None:
    resume_lag = None if resume_frac is None else int(max_lag * resume_frac)
    config = FlowConfig(max_lag=max_lag, resume_lag=resume_lag, stale_after_s=STALE)
    gate = FlowGate(config)
    emitted: list[FlowAction] = []
    newest: float | None = None
    opened: float | None = None
    probe_lags: dict[Channel, int] = {}
    probe_delivered: dict[Channel, int] = {}
    #: The writer's counts at the latest `Wrote`.
    written: dict[Channel, int] = {}

    def estimate(counts: dict[Channel, int]) -> dict[Channel, int]:
        return {
            c: probe_lags.get(c, 0) + max(0, n - probe_delivered.get(c, 0))
            for c, n in counts.items()
        }

    for event in history:
        was_paused = gate.paused
        actions = gate.handle(event)
        emitted += actions
        assert len(actions) <= 1
        if isinstance(event, Probed):
            fresh = newest is None or event.at >= newest
            if fresh:
                newest = event.at
            if fresh:
                probe_lags = channel_lags(event.ends, event.positions)
                probe_delivered = dict(event.delivered)
            # The probe's lag plus what had not been delivered when it began.
            lags = {**probe_lags, **estimate(written)}
            worst = max(lags.values(), default=0)
            if not config.enabled or not fresh:
                assert actions == []
            elif worst > config.max_lag:
                # Above the bound, the gate is paused afterwards, whatever it was.
                assert gate.paused
                named = max(c for c, lag in lags.items() if lag == worst)
                assert actions == ([] if was_paused else [Pause(named, worst)])
            elif worst <= config.resume_at:
                assert not gate.paused
                assert actions == ([Resume()] if was_paused else [])
            else:
                # Between the marks: no change.
                assert actions == []
                assert gate.paused == was_paused
        elif isinstance(event, Wrote):
            written = dict(event.written)
            now_held = estimate(written)
            over = sorted(c for c, lag in now_held.items() if lag > config.max_lag)
            if was_paused or not config.enabled or not over:
                assert actions == []
                assert gate.paused == was_paused
            else:
                # The first channel over the bound, in channel order, is named.
                assert actions == [Pause(over[0], now_held[over[0]])]
                assert gate.paused
        elif isinstance(event, Opened):
            if config.enabled and opened is None:
                opened = event.now
                first = newest is None and not was_paused
                assert actions == ([Pause(None, 0)] if first else [])
                assert gate.paused == (first or was_paused)
            else:
                assert actions == []
                assert gate.paused == was_paused
        else:
            heard = newest if newest is not None else opened
            # A gate that heard nothing (no opening, no probe) holds nobody.
            if was_paused and (heard is None or event.now - heard > STALE):
                assert actions == [Resume()]
                assert not gate.paused
            else:
                assert actions == []
                assert gate.paused == was_paused
    # Pauses and resumes alternate, starting with a pause; `paused` says which came last.
    kinds = [type(a) for a in emitted]
    assert kinds == [Pause, Resume] * (len(kinds) // 2) + [Pause] * (len(kinds) % 2)
    assert gate.paused == (len(kinds) % 2 == 1)
    if not config.enabled:
        assert emitted == []


@given(history=histories(), max_lag=st.integers(1, 30))
def test_a_silent_probe_never_leaves_the_subtask_stuck(
    history: list[FlowEvent], max_lag: int
) -> None:
    """Whatever happened, once no probe answers for longer than the limit, reading resumes."""
    gate = FlowGate(FlowConfig(max_lag=max_lag, stale_after_s=STALE))
    latest = 0.0
    for event in history:
        gate.handle(event)
        if isinstance(event, Probed):
            latest = max(latest, event.at)
        elif not isinstance(event, Wrote):
            latest = max(latest, event.now)
    gate.handle(Tick(latest + STALE + 0.001))
    assert not gate.paused


# -- still_drained: when a probe can be skipped ------------------------------


def test_still_drained_only_while_every_reader_is_at_its_end_and_nothing_was_delivered() -> None:
    a, b = Channel("t", 0), Channel("t", 1)
    drained = Probed(0.0, {a: 5, b: 3}, {a: 5, b: 4}, delivered={a: 5, b: 3})
    assert still_drained(drained, {a: 5, b: 3})
    # A record delivered since: the end moved, ask again.
    assert not still_drained(drained, {a: 6, b: 3})
    # A reader behind its end.
    assert not still_drained(Probed(0.0, {a: 5}, {a: 4}, delivered={a: 5}), {a: 5})
    # No position reported: counted from the start, drained only if that is the end.
    assert still_drained(Probed(0.0, {a: 2}, {}, starts={a: 2}, delivered={a: 2}), {a: 2})
    assert not still_drained(Probed(0.0, {a: 2}, {}, starts={a: 0}, delivered={a: 2}), {a: 2})
    assert not still_drained(Probed(0.0, {a: 2}, {}, delivered={a: 2}), {a: 2})
