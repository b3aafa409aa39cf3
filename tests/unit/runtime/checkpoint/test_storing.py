"""`Storing`: what a worker's snapshot thread is storing, as its heartbeat reports it."""

from __future__ import annotations

import time

import pytest

from kstream.runtime.checkpoint.storing import SLOW_STORE_S, Storing


def test_a_store_is_reported_once_it_is_slow_and_no_more_once_done() -> None:
    storing = Storing()
    assert storing.slow() == ""
    with storing.store(7, "s1-0"):
        start = time.monotonic()
        assert storing.slow(start) == ""
        line = storing.slow(start + SLOW_STORE_S + 2)
        assert line.startswith("storing s1-0's snapshot of checkpoint 7 for ")
    assert storing.slow(start + SLOW_STORE_S + 2) == ""


def test_a_failed_store_is_no_longer_reported() -> None:
    storing = Storing()
    with pytest.raises(OSError, match="hung up"), storing.store(8, "s0-1"):
        raise OSError("the store hung up")
    assert storing.slow(time.monotonic() + 60) == ""
