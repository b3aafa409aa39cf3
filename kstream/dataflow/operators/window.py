"""The window operator: a keyed process function and its timer callback.

Its rules: :ref:`internals-event-time-windows`.

`window_functions` turns an assigner (`Tumbling`, `Sliding`, `Session`), an
allowed lateness and a window function (`Aggregation` or `Apply`) into the
pair ``(process, on_timer)`` a keyed stage runs. They keep everything in the
key's named state and timers, so a snapshot holds the windows and a rollback
restores them:

* map state ``windows``: ``(start, end)`` → ``(contents, emitted)`` where
  `contents` is the aggregation's accumulator (or the tuple of values for
  `Apply`) and `emitted` says a result of the window (or of a session merged
  into it) was already emitted;
* an event-time timer at ``end`` (the result) and at ``end +
  allowed_lateness`` (the cleanup) of every window; a timer is a set member,
  so windows sharing a timestamp share its timer; `on_timer` looks up the
  window ending and the one cleaned at that timestamp (windows of one size),
  or scans the key's sessions for what is due.

What a record does, in this order: a record too late at its partition
(`kstream.protocol.watermarks.lateness`) goes to the ``late`` side output
(`late_record`) and into no window; so does one with a window already
cleaned (only after a partition resumed from idleness behind the watermark).
A record is judged as a whole: it goes into all its windows or into none.
Otherwise it is added to each of its windows; a window still open waits for
its result timer; a window that already fired (``end <= W < end +
allowed_lateness``) emits its new result at once, marked as an update
(unless it is the window's first result: the key had nothing in it when it
fired).

Sliding windows whose size is a multiple of their slide, with no allowed
lateness and an aggregation that merges (`counting` does), keep one entry per
*slice* of one slide instead of one per window (`_sliced_functions`): a
record updates one entry, not ``size / slide`` of them, and a window's timer
merges its slices, as Flink's sliced window aggregation does. The results
are the same.

Session windows merge: the record's own window ``[ts, ts + gap)`` absorbs the
key's sessions it overlaps (`merge_session`); their contents are merged with
`Aggregation.merge` (values concatenated for `Apply`) in window order, their
timers are deleted unless another window still needs them, and the result
counts as emitted if any of them had been. A session that fired and then
absorbed an allowed-late record therefore emits again as a wider session,
marked as an update.

Every result is `window_result`'s dict, which a JSON sink writes as is:
``{"key", "start", "end", "value", "update"}``. A result its timer emits
carries the timer's timestamp, ``end`` (timer outputs are stamped with their
timer's time); an update a record emits carries that record's timestamp.
The operator holds no I/O and no clock: it reads ``ctx`` (`KeyedContext`:
state, times and timers) only, so it is unit-tested with an in-memory context.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from kstream.dataflow.operators.windows import (
    Assigner,
    Session,
    Sliding,
    TimeWindow,
    WindowPhase,
    cleanup_time,
    merge_session,
    window_phase,
)
from kstream.dataflow.state.api import KeyedContext
from kstream.dataflow.types import LATE, Tagged
from kstream.errors import ConfigurationError
from kstream.protocol.watermarks import Lateness, lateness

__all__ = [
    "Aggregation",
    "Apply",
    "WindowFunction",
    "counting",
    "event_time",
    "late_record",
    "window_functions",
    "window_result",
]

#: The map state holding a key's windows.
_WINDOWS: Final = "windows"
#: "No contents yet" (None is a valid accumulator).
_EMPTY: Final = object()


def event_time(ctx: KeyedContext) -> int:
    """The timestamp of the record being processed; refuses a stream without event time."""
    ts = ctx.timestamp
    if ts is None:
        raise ConfigurationError(
            "an event-time operator (window, interval join, enrich) needs a stream with "
            "timestamps: KafkaSource(..., timestamps='kafka' or a function of the value)"
        )
    return ts


#: Accumulator types that cannot be mutated: they need no copy (a deepcopy of an
#: int costs as much as the rest of adding a record to its window).
_IMMUTABLE: Final = frozenset({int, float, bool, str, bytes, type(None)})


def _copy(contents: Any) -> Any:
    return contents if type(contents) in _IMMUTABLE else copy.deepcopy(contents)


@dataclass(frozen=True, slots=True)
class Aggregation:
    """Incremental contents: ``add(acc, value)`` from `initial`; `result(acc)` is emitted.

    `add` and `merge` get copies, so they may mutate and return them (`merge`
    its first argument, not `other`). `merge` (``merge(acc, other) -> acc``) is
    needed for session windows; given, it also lets sliding windows keep one
    accumulator per slice instead of one per window (`_sliced_functions`).
    """

    initial: Any
    add: Callable[[Any, Any], Any]
    result: Callable[[Any], Any] | None = None
    merge: Callable[[Any, Any], Any] | None = None

    def start(self) -> Any:
        return _copy(self.initial)

    def added(self, contents: Any, value: Any) -> Any:
        return self.add(_copy(contents), value)

    def merged(self, contents: Any, other: Any) -> Any:
        assert self.merge is not None, "checked by window_functions"
        return self.merge(_copy(contents), other)

    def output(self, key: Any, window: TimeWindow, contents: Any) -> Any:
        return contents if self.result is None else self.result(contents)


@dataclass(frozen=True, slots=True)
class Apply:
    """Full-window contents: every value is kept; ``fn(key, window, values)`` is emitted.

    `values` is a tuple in arrival order, which is not the same on every run
    when the key's records come from several partitions: `fn` should not
    depend on it (sort, or aggregate order-free) for results a rollback
    reproduces.
    """

    fn: Callable[[Any, TimeWindow, tuple[Any, ...]], Any]

    def start(self) -> Any:
        return ()

    def added(self, contents: Any, value: Any) -> Any:
        return (*contents, value)

    def merged(self, contents: Any, other: Any) -> Any:
        return (*contents, *other)

    def output(self, key: Any, window: TimeWindow, contents: Any) -> Any:
        return self.fn(key, window, tuple(contents))


WindowFunction = Aggregation | Apply

ProcessFn = Callable[[Any, Any, KeyedContext], Iterator[Any]]
TimerFn = Callable[[Any, int, KeyedContext], Iterator[Any]]


def window_result(key: Any, window: TimeWindow, value: Any, update: bool) -> dict[str, Any]:
    """One emitted result of `window` (`update`: an earlier result of it was emitted)."""
    return {"key": key, "start": window.start, "end": window.end, "value": value, "update": update}


def late_record(key: Any, timestamp: int, value: Any, reason: str) -> dict[str, Any]:
    """A too-late record as the ``late`` side output carries it (with why)."""
    return {"key": key, "timestamp": timestamp, "value": value, "reason": reason}


def window_functions(
    assigner: Assigner, allowed_lateness: int, function: WindowFunction
) -> tuple[ProcessFn, TimerFn]:
    """The keyed ``(process, on_timer)`` pair of a window operator (see the module's doc)."""
    if isinstance(allowed_lateness, bool) or not isinstance(allowed_lateness, int):
        raise ConfigurationError(f"allowed_lateness_ms must be whole ms, got {allowed_lateness!r}")
    if allowed_lateness < 0:
        raise ConfigurationError(f"allowed_lateness_ms must be >= 0 ms, got {allowed_lateness}")
    merging = isinstance(assigner, Session)
    # The one size of a non-merging assigner's windows (sessions have none).
    size = 0 if isinstance(assigner, Session) else assigner.size
    if merging and isinstance(function, Aggregation) and function.merge is None:
        raise ConfigurationError(
            "session windows merge: give the aggregation a merge(acc, other) function"
        )
    # Slices need windows made of whole slides, and contents that merge. A job given
    # allowed lateness may restore slices its run without kept: the per-window
    # timers then absorb them into the windows they fire.
    sliced: Aggregation | None = None
    slide = offset = 0
    if (
        isinstance(assigner, Sliding)
        and assigner.size > assigner.slide
        and assigner.size % assigner.slide == 0
        and isinstance(function, Aggregation)
        and function.merge is not None
    ):
        if allowed_lateness == 0:
            return _sliced_functions(assigner, function)
        slide, offset, sliced = assigner.slide, assigner.offset, function

    def process(key: Any, value: Any, ctx: KeyedContext) -> Iterator[Any]:
        ts = event_time(ctx)
        verdict = lateness(ts, ctx.partition_watermark, allowed_lateness)
        if verdict is Lateness.TOO_LATE:
            yield _late(key, ts, value, ctx.partition_watermark, allowed_lateness)
            return
        windows = ctx.map(_WINDOWS)
        if merging:
            yield from _session_add(
                key, value, ts, ctx, windows, assigner, allowed_lateness, function
            )
            return
        watermark = ctx.watermark
        targets = assigner.assign(ts)
        # A record goes into all its windows or into none: one `WindowPhase.CLEANED`
        # refuses it (the phases of `window_phase`, inlined: this runs per record).
        for window in targets:
            if watermark >= window.end + allowed_lateness:
                yield _cleaned(key, ts, value, watermark)
                return
        for window in targets:
            entry = (window.start, window.end)
            stored = windows.get(entry)
            if stored is None:
                # A window's timers are registered with its first record of the key:
                # a stored window has them already (phases only move forward, and only
                # sessions delete timers), and registering costs a state write.
                ctx.timers.register(cleanup_time(window, allowed_lateness))
                contents = function.added(function.start(), value)
                # A fired window may have no state for this key yet (its first
                # record is late but allowed): then this result is its first one.
                emitted = False
            else:
                contents = function.added(stored[0], value)
                emitted = bool(stored[1])
            if watermark < window.end:  # WindowPhase.OPEN
                windows.put(entry, (contents, emitted))
                if stored is None:
                    ctx.timers.register(window.end)
            else:
                windows.put(entry, (contents, True))
                result = function.output(key, window, contents)
                yield window_result(key, window, result, emitted)

    def on_timer(key: Any, timestamp: int, ctx: KeyedContext) -> Iterator[Any]:
        windows = ctx.map(_WINDOWS)
        if merging:
            yield from _session_timer(key, timestamp, windows, allowed_lateness, function)
            return
        # Windows of one size: the window ending at `timestamp` fires, the one
        # whose cleanup time it is goes. No other window is due: each window
        # registered both timers with its first record, and timers fire in
        # timestamp order, so an earlier-due one went at its own timer. Two
        # lookups instead of a scan of the key's windows in RocksDB.
        fire = (timestamp - size, timestamp)
        stored = windows.get(fire)
        # Only a window's end can have slices to absorb; a cleanup time past the
        # allowed lateness need not be one, and its lookups would all miss.
        if sliced is not None and (timestamp - offset) % slide == 0:
            absorbed = _absorb_slices(windows, stored, fire, slide, sliced)
            if stored is None and absorbed is not None:
                ctx.timers.register(timestamp + allowed_lateness)  # its cleanup
            stored = absorbed
        if stored is not None:
            window = TimeWindow(*fire)
            contents = stored[0]
            yield window_result(key, window, function.output(key, window, contents), stored[1])
            windows.put(fire, (contents, True))
        end = timestamp - allowed_lateness
        if windows.contains((end - size, end)):
            windows.remove((end - size, end))

    return process, on_timer


def _sliced_functions(assigner: Sliding, function: Aggregation) -> tuple[ProcessFn, TimerFn]:
    """Sliding windows kept as slices: the ``(process, on_timer)`` of `window_functions`.

    For a `Sliding` whose size is a multiple of its slide, with no allowed
    lateness and an `Aggregation` that merges. Its results are those of the
    per-window path; its state is one entry per key and *slice* ``[start,
    start + slide)`` (slices start where windows do) in the same map state,
    ``(contents, False)``: a record updates one entry instead of ``size /
    slide``, and a window's result merges its slices when its timer fires.
    A slice's timers, the ends of every window holding it, are registered
    with its first record of the key; the last of them removes it. A whole
    window's entry ``(end - size, end)``, as the per-window path keeps it
    (state restored from a job run before slices), is merged in first and
    removed by the same timer.
    """
    size, slide, offset = assigner.size, assigner.slide, assigner.offset

    def process(key: Any, value: Any, ctx: KeyedContext) -> Iterator[Any]:
        ts = event_time(ctx)
        if lateness(ts, ctx.partition_watermark, 0) is Lateness.TOO_LATE:
            yield _late(key, ts, value, ctx.partition_watermark, 0)
            return
        # The record's slice starts where the last of its windows does; the first of
        # them ends one slide after it. With that one cleaned, the record goes into
        # none of them (all its windows or none).
        start = ts - (ts - offset) % slide
        watermark = ctx.watermark
        if watermark >= start + slide:
            yield _cleaned(key, ts, value, watermark)
            return
        windows = ctx.map(_WINDOWS)
        entry = (start, start + slide)
        stored = windows.get(entry)
        if stored is None:
            for end in range(start + slide, start + size + 1, slide):
                ctx.timers.register(end)
            windows.put(entry, (function.added(function.start(), value), False))
        else:
            windows.put(entry, (function.added(stored[0], value), False))

    def on_timer(key: Any, timestamp: int, ctx: KeyedContext) -> Iterator[Any]:
        windows = ctx.map(_WINDOWS)
        fire = (timestamp - size, timestamp)
        whole = windows.get(fire)
        if whole is not None:
            windows.remove(fire)
        stored = _absorb_slices(windows, whole, fire, slide, function)
        if stored is not None:
            window = TimeWindow(*fire)
            yield window_result(key, window, function.output(key, window, stored[0]), stored[1])

    return process, on_timer


def _absorb_slices(
    windows: Any, whole: Any, window: tuple[int, int], slide: int, function: Aggregation
) -> tuple[Any, bool] | None:
    """`window`'s ``(contents, emitted)``: its whole entry (or None) merged with its
    slices in time order; None if it has neither. Removes its first slice, which
    no later window holds."""
    first, end = window
    contents, emitted = (whole[0], bool(whole[1])) if whole is not None else (_EMPTY, False)
    for start in range(first, end, slide):
        part = windows.get((start, start + slide))
        if part is None:
            continue
        contents = part[0] if contents is _EMPTY else function.merged(contents, part[0])
        if start == first:
            windows.remove((start, start + slide))
    return None if contents is _EMPTY else (contents, emitted)


def _session_timer(
    key: Any, timestamp: int, windows: Any, allowed_lateness: int, function: WindowFunction
) -> Iterator[Any]:
    """A key's session timer at `timestamp`: fire the sessions ending then, drop the expired."""
    for entry, (contents, emitted) in list(windows.items()):
        window = TimeWindow(*entry)
        if window.end == timestamp:
            yield window_result(key, window, function.output(key, window, contents), emitted)
            windows.put(_entry(window), (contents, True))
        if cleanup_time(window, allowed_lateness) <= timestamp:
            windows.remove(_entry(window))


def _session_add(
    key: Any,
    value: Any,
    ts: int,
    ctx: KeyedContext,
    windows: Any,
    assigner: Assigner,
    allowed_lateness: int,
    function: WindowFunction,
) -> Iterator[Any]:
    """Add a record to the key's sessions, merging the ones its own window overlaps."""
    (own,) = assigner.assign(ts)
    stored = {TimeWindow(*e): tuple(v) for e, v in windows.items()}
    merge = merge_session(stored, own)
    # Cannot happen for a record not too late at its partition (touching sessions
    # stay apart: docs/internals/event-time.md, "Windows"); reachable only after an
    # idle partition resumed.
    if window_phase(merge.window, ctx.watermark, allowed_lateness) is WindowPhase.CLEANED:
        yield _cleaned(key, ts, value, ctx.watermark)
        return
    contents, emitted = function.start(), False
    for window in sorted(merge.merged):
        old_contents, old_emitted = stored[window]
        contents = function.merged(contents, old_contents)
        emitted = emitted or bool(old_emitted)
        windows.remove(_entry(window))
    contents = function.added(contents, value)
    phase = window_phase(merge.window, ctx.watermark, allowed_lateness)
    needed = {t for w in merge.sessions for t in _timers(w, allowed_lateness)}
    for window in merge.merged:
        for t in _timers(window, allowed_lateness):
            if t not in needed:
                ctx.timers.delete(t)
    ctx.timers.register(cleanup_time(merge.window, allowed_lateness))
    if phase is WindowPhase.OPEN:
        ctx.timers.register(merge.window.end)
        windows.put(_entry(merge.window), (contents, emitted))
    else:
        windows.put(_entry(merge.window), (contents, True))
        result = function.output(key, merge.window, contents)
        yield window_result(key, merge.window, result, emitted)


def _timers(window: TimeWindow, allowed_lateness: int) -> tuple[int, int]:
    return window.end, cleanup_time(window, allowed_lateness)


def _entry(window: TimeWindow) -> tuple[int, int]:
    # A tuple, not the dataclass: state serdes encode plain values only.
    return (window.start, window.end)


def _late(key: Any, ts: int, value: Any, stamp: int, allowed_lateness: int) -> Any:
    reason = (
        f"too late: timestamp {ts} is behind its partition's watermark {stamp} "
        f"by more than the allowed lateness {allowed_lateness} ms"
    )
    return Tagged(LATE, late_record(key, ts, value, reason))


def _cleaned(key: Any, ts: int, value: Any, watermark: int) -> Any:
    reason = f"too late: a window of timestamp {ts} was already cleaned at watermark {watermark}"
    return Tagged(LATE, late_record(key, ts, value, reason))


def counting() -> Aggregation:
    """`Aggregation` counting values (mergeable, so it serves sessions too)."""
    return Aggregation(0, _plus_one, merge=_plus)


def _plus_one(acc: int, _: Any) -> int:
    return acc + 1


def _plus(a: int, b: int) -> int:
    return a + b
