"""`kstream.protocol.pause`: a loop's own pauses, told from the time between its turns."""

from __future__ import annotations

from kstream.protocol.pause import PauseWatch


def test_the_first_turn_is_never_a_pause() -> None:
    assert PauseWatch(5.0).turn(1000.0) == 0.0


def test_turns_within_the_threshold_are_no_pause() -> None:
    watch = PauseWatch(5.0)
    watch.turn(0.0)
    assert watch.turn(4.9) == 0.0
    assert watch.turn(9.0) == 0.0


def test_a_gap_beyond_the_wait_meant_and_the_threshold_is_the_pause() -> None:
    watch = PauseWatch(5.0)
    watch.turn(0.0)
    assert watch.turn(12.0) == 12.0
    # A poll meant to wait up to 2 s that took 12 s stood still for 10 of them.
    assert watch.turn(24.0, waited=2.0) == 10.0
    # Its meant wait alone is no pause.
    assert watch.turn(30.0, waited=6.0) == 0.0
