"""`Storing`: the snapshots a worker's executor has yet to store, as its heartbeat reports them."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from threading import Event

from kstream.runtime.checkpoint.storing import SLOW_STORE_S, Storing


def test_the_snapshot_waiting_longest_is_reported_once_slow_and_no_more_once_done() -> None:
    storing = Storing()
    assert storing.slow() == ""
    first = storing.queued(7, "s1-0")
    start = time.monotonic()
    second = storing.queued(8, "s1-0")
    assert storing.slow(start) == ""
    line = storing.slow(start + SLOW_STORE_S + 2)
    assert line.startswith("storing s1-0's snapshot of checkpoint 7 for ")
    storing.done(first)
    # The one queued behind it has waited as long: still reported.
    assert "checkpoint 8 " in storing.slow(start + SLOW_STORE_S + 2)
    storing.done(second)
    assert storing.slow(start + SLOW_STORE_S + 2) == ""


def test_a_store_queued_behind_a_hung_one_counts_from_its_hand_over() -> None:
    storing = Storing()
    release = Event()
    with ThreadPoolExecutor(1) as executor:
        ids = [storing.queued(n, "s0-0") for n in (1, 2)]
        futures = [executor.submit(release.wait) for _ in ids]
        for n, f in zip(ids, futures, strict=True):
            f.add_done_callback(lambda _, n=n: storing.done(n))
        assert "checkpoint 1 " in storing.slow(time.monotonic() + SLOW_STORE_S)
        release.set()
    assert storing.slow(time.monotonic() + SLOW_STORE_S) == ""
