"""The plain types of the job API that every other part of it shares: tagged side
outputs, the function types of keyed operators, the error policy, event-time stamping.
A leaf: it imports nothing of `kstream.dataflow` but the state interface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

from kstream.dataflow.state.api import KeyedContext

__all__ = ["LATE", "ErrorPolicy", "ProcessFn", "Tagged", "TimerFn", "Timestamps"]

ErrorPolicy = Literal["dead-letter", "skip", "fail"]


ProcessFn = Callable[[Any, Any, KeyedContext], Iterable[Any] | None]
#: ``on_timer(key, timestamp, ctx)``: what a keyed operator emits when one of its timers fires.
TimerFn = Callable[[Any, int, KeyedContext], Iterable[Any] | None]
#: How a source stamps records with event time: the Kafka record's timestamp,
#: a function of the decoded value returning milliseconds, or None (no event time).
Timestamps = Literal["kafka"] | Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class Tagged:
    """A value a process function sends to side output `tag` instead of its main output.

    Yield it from a keyed `process` or a co-process function; the value goes to
    the stream `side_output(tag)` of that operator, in the same stage. A tag
    nobody consumes is a record error (the job's `on_error` policy), never a
    silent loss.
    """

    tag: str
    value: Any


#: The side output too-late records go to (`Stream.side_output(LATE)`); a job
#: that does not consume it has them dead-lettered, as any unconsumed tag.
LATE: Final = "late"
