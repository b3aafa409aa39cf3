"""The plain types of the job API that every other part of it shares: tagged side
outputs, the function types of keyed operators, the error policy, event-time stamping,
and the type variables of the generic front door (`Stream[T]`, `KeyedStream[K, V]`).
A leaf: it imports nothing of `kstream.dataflow` but the state interface.

The type variables default to `Any` (PEP 696, through `typing_extensions`), so a
bare `Stream` or `Source` in an annotation means ``Stream[Any]``, as before the
API was generic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from typing_extensions import TypeVar

from kstream.dataflow.state.api import KeyedContext

__all__ = [
    "LATE",
    "ErrorPolicy",
    "K",
    "KeyedFn",
    "O",
    "OnTimer",
    "ProcessFn",
    "T",
    "Tagged",
    "TimerFn",
    "Timestamps",
    "U",
    "V",
    "W",
]

#: The values of a stream (`Stream[T]`, `Source[T]`).
T = TypeVar("T", default=Any)
#: The values a function makes of them (`map(Callable[[T], U]) -> Stream[U]`).
U = TypeVar("U", default=Any)
#: The key of a keyed stream (`KeyedStream[K, V]`).
K = TypeVar("K", default=Any)
#: The values of a keyed stream.
V = TypeVar("V", default=Any)
#: The values of the second of two connected streams (`ConnectedStreams[K, V, W]`).
W = TypeVar("W", default=Any)
#: What a keyed function emits.
O = TypeVar("O", default=Any)  # noqa: E741 - the letter of house.md's KeyedFn[K, V, O]

ErrorPolicy = Literal["dead-letter", "skip", "fail"]


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


#: ``fn(key, value, ctx)`` of a keyed `process`: yields (or returns) its outputs, or None.
#: A `Tagged` output goes to a side output, so it is not one of the stream's values `O`.
KeyedFn: TypeAlias = Callable[[K, V, KeyedContext], Iterable[O | Tagged] | None]
#: ``on_timer(key, timestamp, ctx)``: what a keyed operator emits when one of its timers fires.
OnTimer: TypeAlias = Callable[[K, int, KeyedContext], Iterable[O | Tagged] | None]
#: A keyed function of any types, as the runtime holds it.
ProcessFn: TypeAlias = KeyedFn[Any, Any, Any]
#: A timer callback of any types, as the runtime holds it.
TimerFn: TypeAlias = OnTimer[Any, Any]
#: How a source stamps records with event time: the Kafka record's timestamp,
#: a function of the decoded value returning milliseconds, or None (no event time).
Timestamps = Literal["kafka"] | Callable[[Any], Any] | None


#: The side output too-late records go to (`Stream.side_output(LATE)`); a job
#: that does not consume it has them dead-lettered, as any unconsumed tag.
LATE: Final = "late"
