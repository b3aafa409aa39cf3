"""What a subtask is processing now: the current element's time, read by operators,
channel writers and sinks.

`ElementContext` is one mutable object per subtask that the task sets before
each push (the current record's timestamp and partition stamp) and after each
watermark change (the subtask's watermark and idleness). Operators, channel
writers and sinks read it instead of receiving the time as an argument, so a
stage without event time pays nothing per record. `now_ms` is processing time.
This module is a leaf of `kstream.runtime.state.store`: keyed state and timers both
read it, and it reads neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kstream.protocol.watermarks import MIN_WATERMARK

__all__ = ["TIMERS_STATE", "ElementContext", "now_ms"]

#: The state name under which an operator's timers are stored (reserved for them).
TIMERS_STATE = "timers"


def now_ms() -> int:
    """Processing time: wall-clock milliseconds (what processing-time timers wait for)."""
    return time.time_ns() // 1_000_000


class ElementContext:
    """What the subtask is processing now, in event time.

    `timestamp` and `stamp` (the record's partition watermark) belong to the
    record being pushed, or to the timer firing (both its timestamp then);
    `watermark` and `idle` are the subtask's own, sent downstream with its
    channel flushes. `timed` says whether the stage has event time at all.
    `clock` is processing time as the subtask's operators read it
    (``ctx.now()``): the wall clock, or a clock a test moves by hand.
    """

    __slots__ = ("clock", "idle", "stamp", "timed", "timestamp", "watermark")

    def __init__(self, timed: bool, clock: Callable[[], int] = now_ms) -> None:
        self.timed = timed
        self.clock = clock
        self.timestamp: int | None = None
        self.stamp = MIN_WATERMARK
        self.watermark = MIN_WATERMARK
        self.idle = False
