"""Event-time watermarks: per source partition, per source subtask, per input.

A watermark ``W`` says "every record with a timestamp below ``W`` has been
seen". Timestamps and watermarks are integers (milliseconds); `MIN_WATERMARK`
stands for "nothing known yet".

* **Partition** (`SourceWatermarks`): ``W_p = max timestamp seen in p -
  out_of_orderness``. A partition is a total order, so ``W_p`` before each
  record is the same on every run, after a rollback too.
* **Source subtask**: the minimum of ``W_p`` over its partitions that are not
  idle, never moving back. A partition is idle once ``idle_timeout`` of
  processing time passed without it delivering anything; it is active again
  from its next record. When every partition is idle the subtask is idle: its
  watermark stays and readers leave it out of their minimum.
* **Input of a subtask** (`InputWatermarks`): the minimum over its input
  channels of the watermark each channel's writer last sent (idle channels
  left out), never moving back.

Lateness is decided against the record's OWN partition: a record is stamped
with ``W_p`` as it was before the record (`Stamped.partition_watermark`), and
`lateness` classifies it from that alone, so the verdict does not depend on how
partitions interleave. A record with ``timestamp >= W_p`` (within
``out_of_orderness`` of its partition's maximum) is behind no watermark
downstream, because every downstream watermark is at most ``W_p`` while the
partition is not idle (the property tests check it over interleavings).

Nothing here reads a clock or does I/O: processing time comes in as a number
(``now``, monotonic milliseconds), and so does the wall clock (``wall_clock``,
epoch milliseconds); decisions go out as values. A record without a usable
timestamp, or too far ahead of its partition's watermark, is `Unusable` (with
the reason) rather than an exception: the caller applies the job's error
policy, and the record moves no watermark.

A partition's first record has no watermark to be judged against, and
accepting a far-future one would put the partition's watermark there for
good (every later record late, no window firing). So it is judged against the
wall clock instead: more than ``max_future`` ahead of it is `Unusable` too.
Not against the other partitions' watermarks: which of them were read first
differs between runs, and the verdict must not.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from kstream.errors import CheckpointError, ConfigurationError

__all__ = [
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
    "MIN_WATERMARK",
    "InputWatermarks",
    "Lateness",
    "SourceWatermarks",
    "Stamped",
    "Unusable",
    "UnusableKind",
    "WatermarkConfig",
    "lateness",
    "unusable_reason",
    "usable_timestamp",
]

#: Timestamps are signed 64-bit milliseconds: what Kafka stores and what the
#: timer key encoding can order.
MIN_TIMESTAMP: Final = -(2**63)
MAX_TIMESTAMP: Final = 2**63 - 1
#: "Nothing known yet": below every timestamp, so it holds everything back.
MIN_WATERMARK: Final = MIN_TIMESTAMP

#: Defaults: 5 s of disorder, idle after 10 s, 1 day of future
#: (docs/internals/event-time.md, "Event time").
DEFAULT_OUT_OF_ORDERNESS_MS: Final = 5_000
DEFAULT_IDLE_TIMEOUT_MS: Final = 10_000
DEFAULT_MAX_FUTURE_MS: Final = 86_400_000


@dataclass(frozen=True, slots=True)
class WatermarkConfig:
    """How a source makes watermarks (all in milliseconds, none negative)."""

    out_of_orderness: int = DEFAULT_OUT_OF_ORDERNESS_MS
    idle_timeout: int = DEFAULT_IDLE_TIMEOUT_MS
    max_future: int = DEFAULT_MAX_FUTURE_MS

    def __post_init__(self) -> None:
        for name in ("out_of_orderness", "idle_timeout", "max_future"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(f"{name} must be a whole number of ms >= 0, got {value!r}")


@dataclass(frozen=True, slots=True)
class Stamped:
    """A record accepted with its timestamp.

    `partition_watermark` is its partition's watermark *before* it: what the
    record carries downstream so that `lateness` gives the same verdict on any
    run. `advanced_to` is the subtask's new watermark when this record moved
    it, else None.
    """

    timestamp: int
    partition_watermark: int
    advanced_to: int | None


class UnusableKind(enum.Enum):
    MISSING = "missing timestamp"
    FAR_FUTURE = "timestamp too far in the future"


@dataclass(frozen=True, slots=True)
class Unusable:
    """A record whose timestamp cannot be used: a record error, with `reason`."""

    kind: UnusableKind
    reason: str


class Lateness(enum.Enum):
    """A record's verdict against its partition's watermark."""

    #: Not behind its partition's watermark: behind no watermark downstream.
    ON_TIME = "on time"
    #: Behind it by at most the allowed lateness: results it changes are
    #: emitted again, as updates.
    ALLOWED = "late, within allowed lateness"
    #: Behind it by more: goes to the late output, never into state.
    TOO_LATE = "too late"


def lateness(timestamp: int, partition_watermark: int, allowed_lateness: int) -> Lateness:
    """Classify a stamped record: too late iff ``ts < W_p - allowed_lateness``."""
    if timestamp >= partition_watermark:
        return Lateness.ON_TIME
    if timestamp >= partition_watermark - allowed_lateness:
        return Lateness.ALLOWED
    return Lateness.TOO_LATE


def usable_timestamp(value: object) -> int | None:
    """`value` as a timestamp, or None if it is none (not a 64-bit integer)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if MIN_TIMESTAMP <= value <= MAX_TIMESTAMP else None


def unusable_reason(value: object) -> str:
    """Why `value` (refused by `usable_timestamp`) is no timestamp, saying what is needed."""
    if value is None:
        return "no usable timestamp: None"
    if isinstance(value, float):
        # The common mistake (seconds * 1000, or a parsed float): say what to do.
        return (
            f"no usable timestamp: {value!r} is a float: timestamps= must return an int "
            "of milliseconds (e.g. int(ms))"
        )
    if isinstance(value, int) and not isinstance(value, bool):
        return f"no usable timestamp: {value} does not fit in 64 signed bits of milliseconds"
    return f"no usable timestamp: {value!r}: timestamps= must return an int of milliseconds"


class SourceWatermarks:
    """The watermarks of one source subtask's partitions and of the subtask.

    Call `observe` for every record read (in partition order), `tick` between
    polls so idleness is noticed when nothing arrives, and forward
    `watermark` (and `idle`) with the subtask's output.
    """

    def __init__(self, config: WatermarkConfig, partitions: Iterable[int], now: int) -> None:
        self.config = config
        self._max: dict[int, int] = {}
        self._last_active: dict[int, int] = dict.fromkeys(partitions, now)
        self._idle: set[int] = set()
        self._watermark = MIN_WATERMARK
        if not self._last_active:
            raise ConfigurationError("a source subtask needs at least one partition")

    @property
    def watermark(self) -> int:
        return self._watermark

    @property
    def idle(self) -> bool:
        """Every partition is idle: readers leave this subtask out of their minimum."""
        return len(self._idle) == len(self._last_active)

    def partition_watermark(self, partition: int) -> int:
        top = self._max.get(partition)
        return (
            MIN_WATERMARK if top is None else max(MIN_WATERMARK, top - self.config.out_of_orderness)
        )

    def observe(
        self, partition: int, timestamp: object, now: int, wall_clock: int | None = None
    ) -> Stamped | Unusable:
        """One record of `partition` with `timestamp` (anything; None if it has none).

        `wall_clock` (epoch ms) judges a partition's first record: more than
        ``max_future`` ahead of it is `Unusable`. None judges it against
        nothing (the watermark rules alone, as the property tests check them).
        """
        if partition not in self._last_active:
            raise ConfigurationError(f"partition {partition} is not read by this subtask")
        self._last_active[partition] = now
        self._idle.discard(partition)
        ts = usable_timestamp(timestamp)
        before = self.partition_watermark(partition)
        if ts is None:
            return Unusable(UnusableKind.MISSING, unusable_reason(timestamp))
        future = self.config.max_future
        if before != MIN_WATERMARK and ts - before > future:
            return Unusable(
                UnusableKind.FAR_FUTURE,
                f"timestamp {ts} is more than {future} ms ahead of "
                f"partition {partition}'s watermark {before}",
            )
        if partition not in self._max and wall_clock is not None and ts - wall_clock > future:
            return Unusable(
                UnusableKind.FAR_FUTURE,
                f"timestamp {ts} of partition {partition}'s first record is more than "
                f"{future} ms ahead of the wall clock ({wall_clock}): it would hold the "
                "partition's watermark there, making every later record late",
            )
        self._max[partition] = max(ts, self._max.get(partition, ts))
        return Stamped(ts, before, self._advance())

    def tick(self, now: int) -> int | None:
        """Mark partitions silent for `idle_timeout` idle; the new watermark if it moved."""
        for partition, last in self._last_active.items():
            if now - last >= self.config.idle_timeout:
                self._idle.add(partition)
        return self._advance()

    def _advance(self) -> int | None:
        active = [self.partition_watermark(p) for p in self._last_active if p not in self._idle]
        if active and min(active) > self._watermark:
            self._watermark = min(active)
            return self._watermark
        return None

    def snapshot(self) -> dict[str, object]:
        """Plain ints: each partition's max timestamp, the idle ones, the watermark."""
        return {
            "max": dict(self._max),
            "idle": sorted(self._idle),
            "watermark": self._watermark,
        }

    @classmethod
    def restore(
        cls,
        config: WatermarkConfig,
        partitions: Iterable[int],
        snapshot: Mapping[str, object],
        now: int,
    ) -> SourceWatermarks:
        """The state `snapshot` describes; active partitions count as active since `now`.

        Partitions the snapshot does not know start empty; ones it knows but
        this subtask no longer reads are dropped.
        """
        restored = cls(config, partitions, now)
        try:
            tops = _int_map(snapshot["max"])
            idle = {int(p) for p in _int_list(snapshot["idle"])}
            watermark = _int(snapshot["watermark"])
        except (KeyError, TypeError, ValueError) as e:
            raise CheckpointError(f"unreadable source watermark snapshot: {e!r}") from None
        restored._max = {p: t for p, t in tops.items() if p in restored._last_active}
        restored._idle = idle & set(restored._last_active)
        restored._watermark = watermark
        return restored


class InputWatermarks:
    """A subtask's input watermark: the minimum over its input channels.

    Channels are any hashable names (the runtime uses `barrier.Channel`).
    `observe` takes what a channel's writer sent with a batch, to be applied
    after the batch's records; a watermark below one seen before on that
    channel is ignored (a writer's watermark never moves back).
    """

    def __init__(self, channels: Iterable[Hashable]) -> None:
        self._channel: dict[Hashable, int] = dict.fromkeys(channels, MIN_WATERMARK)
        self._idle: set[Hashable] = set()
        self._watermark = MIN_WATERMARK
        if not self._channel:
            raise ConfigurationError("a subtask needs at least one input channel")

    @property
    def watermark(self) -> int:
        return self._watermark

    @property
    def idle(self) -> bool:
        return len(self._idle) == len(self._channel)

    def observe(self, channel: Hashable, watermark: int, idle: bool = False) -> int | None:
        """`channel`'s writer is at `watermark` (idle or not); the input watermark if it moved."""
        if channel not in self._channel:
            raise ConfigurationError(f"{channel} is not an input channel of this subtask")
        self._channel[channel] = max(self._channel[channel], watermark)
        if idle:
            self._idle.add(channel)
        else:
            self._idle.discard(channel)
        active = [w for c, w in self._channel.items() if c not in self._idle]
        if active and min(active) > self._watermark:
            self._watermark = min(active)
            return self._watermark
        return None

    def snapshot(self) -> dict[str, object]:
        """Each channel's watermark (in the channels' order), the idle ones, the input watermark."""
        channels = list(self._channel)
        return {
            "channels": [self._channel[c] for c in channels],
            "idle": [i for i, c in enumerate(channels) if c in self._idle],
            "watermark": self._watermark,
        }

    @classmethod
    def restore(
        cls, channels: Iterable[Hashable], snapshot: Mapping[str, object]
    ) -> InputWatermarks:
        """The state `snapshot` describes, for the same channels in the same order."""
        restored = cls(channels)
        names = list(restored._channel)
        try:
            marks = _int_list(snapshot["channels"])
            idle = _int_list(snapshot["idle"])
            watermark = _int(snapshot["watermark"])
            if len(marks) != len(names):
                raise ValueError(f"{len(marks)} channels in the snapshot, {len(names)} now")
            restored._idle = {names[i] for i in idle}
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise CheckpointError(f"unreadable input watermark snapshot: {e!r}") from None
        restored._channel = dict(zip(names, marks, strict=True))
        restored._watermark = watermark
        return restored


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {value!r}")
    return value


def _int_list(value: object) -> list[int]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"expected a list, got {value!r}")
    return [_int(v) for v in value]


def _int_map(value: object) -> dict[int, int]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a mapping, got {value!r}")
    # JSON turns integer keys into strings; take them back.
    return {int(k): _int(v) for k, v in value.items()}
