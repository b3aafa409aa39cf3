"""Event-time joins of two keyed streams: the interval join and the stream-table enrichment.

Both are co-process functions over `KeyedContext` (side 0 is the first
stream, side 1 the second) with one timer callback, as :ref:`internals-event-time-joins` decides;
everything they remember is the key's map state and timers, so snapshots
hold it and a rollback replays the same output. Neither has allowed
lateness: a record behind its partition's watermark is too late and goes to
the ``late`` side output (`late_record`, with the side), which is what lets
a buffer entry be dropped for good.

**Interval join** (`interval_join_functions`): pairs of records of a key with
``l.ts - lower <= r.ts <= l.ts + upper``. Each side is buffered in map state
by timestamp (``join.left`` / ``join.right``: ts → tuple of values); a record
is matched against the other side's buffer when it arrives, so every pair is
emitted once, by whichever of the two came second. A left entry is dropped by
a timer at ``l.ts + upper + 1`` and a right one at ``r.ts + lower + 1``: once
the watermark is there, every admissible record still to come of the other
side is too far to match. Output: ``{"key", "left", "right", "timestamp":
max(l.ts, r.ts)}`` (`joined`). Inner join only.

**Stream-table enrichment** (`enrichment_functions`): a stream record at
``t`` is emitted once the watermark reaches ``t + 1`` with the table value of
its key as of ``t``: the version with the greatest timestamp ``<= t`` (a
tombstone, value None, or no version gives None). Stream records wait in
``enrich.pending`` (t → tuple of values) behind a timer at ``t + 1``; table
versions are in ``enrich.versions`` (ts → value); of two versions of a key
with one timestamp the later arrival wins, which is the later offset because
a table topic keeps a key in one partition. A version's timer at ``ts + 1``
prunes the versions older than the newest one below the watermark, which no
stream record still to come can pick. Output: ``{"key", "value", "table",
"timestamp": t}`` (`enriched`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from kstream.dataflow.operators.window import event_time, late_record
from kstream.dataflow.state.api import KeyedContext
from kstream.dataflow.types import LATE, ProcessFn, Tagged, TimerFn
from kstream.errors import ConfigurationError
from kstream.protocol.watermarks import Lateness, lateness

__all__ = [
    "enriched",
    "enrichment_functions",
    "interval_join_functions",
    "joined",
]

_LEFT: Final = "join.left"
_RIGHT: Final = "join.right"
_PENDING: Final = "enrich.pending"
_VERSIONS: Final = "enrich.versions"
#: Side names in the late output, by side index.
_SIDES: Final = ("left", "right")


def joined(key: Any, left: Any, right: Any, timestamp: int) -> dict[str, Any]:
    """One pair of the interval join."""
    return {"key": key, "left": left, "right": right, "timestamp": timestamp}


def enriched(key: Any, value: Any, table: Any, timestamp: int) -> dict[str, Any]:
    """One stream record with its key's table value as of `timestamp` (None: none)."""
    return {"key": key, "value": value, "table": table, "timestamp": timestamp}


def _too_late(key: Any, value: Any, ctx: KeyedContext, side: str) -> Tagged | None:
    ts, stamp = event_time(ctx), ctx.partition_watermark
    if lateness(ts, stamp, 0) is not Lateness.TOO_LATE:
        return None
    record = late_record(
        key,
        ts,
        value,
        f"too late: timestamp {ts} is behind its partition's "
        f"watermark {stamp} ({side} side of a join, no allowed lateness)",
    )
    return Tagged(LATE, {**record, "side": side})


def _append(state: Any, ts: int, value: Any) -> None:
    values = state.get(ts)
    state.put(ts, (value,) if values is None else (*values, value))


def interval_join_functions(lower: int, upper: int) -> tuple[ProcessFn, ProcessFn, TimerFn]:
    """``(left, right, on_timer)`` of an inner interval join (see the module's doc)."""
    for name, bound in (("lower_ms", lower), ("upper_ms", upper)):
        if isinstance(bound, bool) or not isinstance(bound, int):
            raise ConfigurationError(f"an interval join's {name} is whole ms, got {bound!r}")
    if lower + upper < 0:
        raise ConfigurationError(
            f"an interval join matches l.ts - lower_ms <= r.ts <= l.ts + upper_ms: lower_ms "
            f"{lower} and upper_ms {upper} leave no room (lower_ms + upper_ms must be >= 0)"
        )

    def side(mine: str, other: str, name: str, low: int, high: int, drop_after: int) -> ProcessFn:
        # A record at ts of this side matches the other side's ts - low <= o.ts <= ts + high.
        def process(key: Any, value: Any, ctx: KeyedContext) -> Iterator[Any]:
            late = _too_late(key, value, ctx, name)
            if late is not None:
                yield late
                return
            ts = event_time(ctx)
            for other_ts, values in ctx.map(other).items():
                if ts - low <= other_ts <= ts + high:
                    stamp = max(ts, other_ts)
                    for o in values:
                        pair = (value, o) if name == "left" else (o, value)
                        yield joined(key, *pair, stamp)
            _append(ctx.map(mine), ts, value)
            ctx.timers.register(ts + drop_after + 1)

        return process

    left = side(_LEFT, _RIGHT, "left", lower, upper, upper)
    # A right record at r matches the lefts with r - upper <= l.ts <= r + lower.
    right = side(_RIGHT, _LEFT, "right", upper, lower, lower)

    def on_timer(key: Any, timestamp: int, ctx: KeyedContext) -> Iterator[Any]:
        for name, keep_for in ((_LEFT, upper), (_RIGHT, lower)):
            buffer = ctx.map(name)
            for ts in [t for t, _ in buffer.items() if t + keep_for + 1 <= timestamp]:
                buffer.remove(ts)
        return iter(())

    return left, right, on_timer


def enrichment_functions() -> tuple[ProcessFn, ProcessFn, TimerFn]:
    """``(stream, table, on_timer)`` of the stream-table enrichment (see the module's doc)."""

    def stream(key: Any, value: Any, ctx: KeyedContext) -> Iterator[Any]:
        late = _too_late(key, value, ctx, "stream")
        if late is not None:
            yield late
            return
        ts = event_time(ctx)
        _append(ctx.map(_PENDING), ts, value)
        ctx.timers.register(ts + 1)

    def table(key: Any, value: Any, ctx: KeyedContext) -> Iterator[Any]:
        late = _too_late(key, value, ctx, "table")
        if late is not None:
            yield late
            return
        ts = event_time(ctx)
        ctx.map(_VERSIONS).put(ts, value)
        ctx.timers.register(ts + 1)

    def on_timer(key: Any, timestamp: int, ctx: KeyedContext) -> Iterator[Any]:
        # The watermark is at least `timestamp`: every record below it has been seen.
        versions = sorted(ctx.map(_VERSIONS).items(), key=lambda tv: tv[0])
        pending = ctx.map(_PENDING)
        for ts, values in sorted(pending.items(), key=lambda tv: tv[0]):
            if ts + 1 > timestamp:
                break
            current = [v for t, v in versions if t <= ts]
            for value in values:
                yield enriched(key, value, current[-1] if current else None, ts)
            pending.remove(ts)
        below = [t for t, _ in versions if t < timestamp]
        for t in below[:-1]:
            ctx.map(_VERSIONS).remove(t)

    return stream, table, on_timer
