"""When a source subtask snapshots (`kstream.protocol.initiation.SourceInitiation`)."""

from __future__ import annotations

import pytest

from kstream.errors import ConfigurationError
from kstream.protocol.initiation import Decline, Ignore, SourceInitiation, Take
from kstream.protocol.snapshot_id import INITIATORS, LamportClock, SnapshotId


def c(sequence: int, initiator: int = 0) -> int:
    return SnapshotId(sequence, initiator).encode()


def test_triggers_newer_than_anything_taken_are_taken() -> None:
    source = SourceInitiation(initiator=1)
    assert source.on_trigger(c(1)) == Take(c(1))
    assert source.on_trigger(c(3)) == Take(c(3))
    assert source.last == c(3)


def test_a_trigger_older_than_a_snapshot_taken_is_declined() -> None:
    source = SourceInitiation(initiator=2, last=c(5))  # restored from c(5)
    answer = source.on_trigger(c(4, 1))
    assert isinstance(answer, Decline)
    assert answer.checkpoint == c(4, 1)
    assert "overtaken" in answer.reason
    assert source.on_trigger(c(5)) == Decline(c(5), answer.reason)  # the restored one itself


def test_its_own_snapshot_relayed_back_is_ignored_even_after_newer_ones() -> None:
    clock = LamportClock(c(2))
    source = SourceInitiation(initiator=1, every=1.0, now=0.0)
    own = source.start(1.0, clock)
    assert own == c(3, 1)
    assert source.on_trigger(c(4)) == Take(c(4))
    assert source.on_trigger(own) == Ignore()
    # A relay read after the completion (it took it: every subtask acked it).
    source.on_complete(c(4))
    assert source.on_trigger(own) == Ignore()


def test_its_own_interval_starts_snapshots_after_the_largest_id_seen() -> None:
    clock = LamportClock()
    source = SourceInitiation(initiator=3, last=c(7), every=2.0, now=10.0)
    assert source.start(11.9, clock) is None
    first = source.start(12.0, clock)
    # Above the restored snapshot even though the clock had seen nothing.
    assert first == c(8, 3)
    assert source.start(13.0, clock) is None
    source.on_complete(first)
    clock.observe(c(20, 5))  # another initiator's, read on the control topic
    assert source.start(14.0, clock) == c(21, 3)
    assert clock.seen == c(21, 3)


def test_a_request_starts_one_snapshot_at_the_next_batch_boundary() -> None:
    clock = LamportClock()
    source = SourceInitiation(initiator=1)  # no interval
    assert source.start(100.0, clock) is None
    source.request()
    source.request()  # two requests in one batch: one snapshot
    assert source.start(100.0, clock) == c(1, 1)
    assert source.start(100.0, clock) is None


def test_ids_a_source_starts_grow_and_never_repeat() -> None:
    clock = LamportClock()
    source = SourceInitiation(initiator=INITIATORS - 1, every=0.5)
    started = []
    for t in range(1, 50):
        n = source.start(float(t), clock)
        assert n is not None
        started.append(n)
        source.on_complete(n)
    assert started == sorted(set(started))


def test_a_bad_interval_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        SourceInitiation(initiator=1, every=0.0)


def test_it_starts_none_while_a_snapshot_it_knows_of_is_in_flight() -> None:
    clock = LamportClock()
    source = SourceInitiation(initiator=1, every=1.0)
    assert source.on_trigger(c(1)) == Take(c(1))
    source.request()
    assert source.start(5.0, clock) is None  # c(1) in flight: interval and request wait
    source.on_abort(c(1))
    own = source.start(5.0, clock)
    assert own == c(2, 1)
    assert source.in_flight == {own}
    assert source.start(9.0, clock) is None
    # A newer completion ends everything older (its aborts may come later).
    assert source.on_trigger(c(3)) == Take(c(3))
    source.on_complete(c(3))
    assert source.in_flight == frozenset()
    assert source.start(9.0, clock) == c(4, 1)


def test_it_starts_none_while_another_sources_announced_snapshot_is_unrelayed() -> None:
    # Another source's `Initiated` is read before the coordinator's relay: a source
    # starting its own in between would overtake it (a larger id) and decline it.
    clock = LamportClock()
    source = SourceInitiation(initiator=2)
    source.request()
    other = c(1, 1)
    clock.observe(other)
    source.on_announced(other)
    assert source.start(1.0, clock) is None  # waits for the relay
    assert source.on_trigger(other) == Take(other)
    assert source.start(1.0, clock) is None  # now in flight here
    source.on_complete(other)
    assert source.start(1.0, clock) == c(2, 2)


@pytest.mark.parametrize("end", ["abort", "complete"])
def test_an_announced_snapshot_that_ends_unrelayed_releases_the_wait(end: str) -> None:
    clock = LamportClock()
    source = SourceInitiation(initiator=2)
    source.request()
    source.on_announced(c(1, 1))
    if end == "abort":
        source.on_abort(c(1, 1))  # e.g. the in-flight limit
    else:
        source.on_complete(c(1, 1))
    assert source.start(1.0, clock) is not None


def test_announcements_it_need_not_wait_for() -> None:
    clock = LamportClock()
    source = SourceInitiation(initiator=2, last=c(3))
    source.on_announced(c(2, 1))  # older than one it took: it will decline the relay
    own = source.start(1.0, clock) if source.request() is None else None
    assert own is not None
    source.on_announced(own)  # its own, read back
    source.on_complete(own)
    source.request()
    assert source.start(1.0, clock) is not None


def test_concurrent_sources_start_up_to_max_in_flight_and_take_triggers_in_any_order() -> None:
    s = SourceInitiation(1, concurrent=True, max_in_flight=2)
    clock = LamportClock()
    s.request()
    mine = s.start(0.0, clock)
    assert mine is not None
    # A snapshot of its own in flight does not hold the next request back...
    s.request()
    second = s.start(0.1, clock)
    assert second is not None
    assert second > mine
    # ...up to max_in_flight.
    s.request()
    assert s.start(0.2, clock) is None
    # Another source's id below the ones it took: taken, not declined.
    other = SnapshotId(1, 2).encode()
    assert other < second
    assert s.on_trigger(other) == Take(other)
    assert s.on_trigger(other) == Ignore()  # read twice
    assert s.on_trigger(mine) == Ignore()  # the relay of its own
    # A newer one completing leaves the older ones in flight: they may complete too.
    s.on_complete(second)
    assert s.in_flight == {mine, other}
    s.on_abort(mine)
    s.on_complete(other)
    assert s.start(0.3, clock) is not None  # the request waited for room


def test_a_concurrent_source_with_sinks_keeps_id_order() -> None:
    s = SourceInitiation(1, concurrent=True, max_in_flight=3, ordered=True)
    s.request()
    mine = s.start(0.0, LamportClock(SnapshotId(1, 0).encode()))
    assert mine is not None
    older = SnapshotId(2, 3).encode()
    assert older < mine
    assert isinstance(s.on_trigger(older), Decline)
