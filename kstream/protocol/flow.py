"""Flow control between stages: when a subtask that writes channels stops reading, as a pure
state machine.

A subtask whose stage writes channels (a source, or any stage before the last)
must not write faster than its downstream subtasks read: a channel's backlog
delays every barrier written behind it, so a checkpoint would take as long as
draining it. `FlowGate` decides, from what the channels hold, whether the
subtask reads its inputs:

* the **lag** of a channel is its end offset minus the position its reader
  reported (`Probed`), in channel records, never below 0. A channel whose
  reader reported no position yet counts from the channel's first offset (a
  reader that has not started yet has read nothing of it); without that
  either, its lag is 0;
* between two probes the writer adds what it wrote (`Wrote`, its own counts
  of records handed to its producer) beyond what had been delivered when the
  latest probe began (`Probed.delivered`): a fast writer pauses within one
  batch of crossing the bound instead of one probe round trip later. Counting
  from the records *delivered* rather than handed matters: a record still in
  the producer's queue when the probe read the end offsets is in neither the
  probe's lag nor, counted from what was handed, the writer's addition, and on
  a loaded machine those queues hold several records per channel (a channel
  bounded at 10 records was measured at 44). The estimate errs high by what
  the probe already saw of the records it adds, until the next probe
  replaces it;
* a gate starts paused (`Opened`): until the first probe answers, the
  writer does not know what its channels hold (a restarted job's channels
  may hold a backlog already, and a writer reading on would add a few
  batches before it learns so);
* the gate **pauses** (`Pause`) once some channel's lag exceeds
  `FlowConfig.max_lag`, and **resumes** (`Resume`) once every channel's lag is
  at most `FlowConfig.resume_lag` (hysteresis: one probe's noise must not
  flip it back and forth); the lag both decisions use is the estimate
  above, the probe's plus what was not delivered yet when it began;
* a paused gate whose latest probe (or its opening, before any probe) is
  older than `FlowConfig.stale_after_s`, or that heard neither, resumes
  (`Tick`): when the probes
  stop answering, reading on is the safe side, since lag only costs latency
  while a stuck source costs the job;
* ``max_lag == 0`` turns flow control off: the gate never pauses.

The gate acts between two reads of the subtask, so what one read makes the
subtask write lands before the gate can pause it: a source reading a thousand
lines of eight words each writes some ten channel records per channel in one
turn, as many as a small bound. So the gate also sizes the next read
(`FlowGate.read_limit`), as credit: the room left below the bound on the
fullest channel, divided by the channel records one input record made the
subtask write (`Wrote.read` and the counts give it per turn, erring high;
the estimate follows a rise at once and decays slowly), less the partial
batch every turn ends with, and never less than what fills one channel
record (reads of a line or two would fill the bound with records of a few
stream records each). A channel then holds at most about the bound plus one
channel record and what one input record makes, whatever the batch size.

`FlowGate.handle` takes one event and returns the actions the runtime carries
out (pause or resume reading every input it does not hold for another
reason). It does no I/O and reads no clock: times come in the events.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import assert_never

from kstream.errors import ConfigurationError
from kstream.protocol.barrier import Channel

__all__ = [
    "DEFAULT_MAX_LAG",
    "FlowAction",
    "FlowConfig",
    "FlowEvent",
    "FlowGate",
    "Opened",
    "Pause",
    "Probed",
    "Resume",
    "Tick",
    "Wrote",
    "channel_lags",
    "still_drained",
]

#: Channel records a channel may hold before its writer pauses. A channel record
#: carries up to 500 stream records (`kstream.runtime.channels.format.MAX_BATCH`), so a
#: full backlog is up to 50,000 stream records per channel: about a second of a
#: Python operator's work, the longest a barrier then waits behind it, and far
#: more than is drained during one probe round trip (~0.2 s), so the reader
#: never runs dry while its writer waits to learn it may go on.
DEFAULT_MAX_LAG = 100
#: How old the latest probe may be before a paused gate resumes blind.
DEFAULT_STALE_AFTER_S = 5.0
#: Per turn without a rise, the fan-out estimate (channel records per input
#: record) keeps this share of itself: a burst of large records is remembered
#: for some turns, and a turn with barriers is soon forgotten.
FANOUT_DECAY = 0.9


@dataclass(frozen=True, slots=True)
class FlowConfig:
    """Bounds of one gate: pause above `max_lag`, resume at or below `resume_lag`."""

    max_lag: int = DEFAULT_MAX_LAG
    #: Default: half of `max_lag`.
    resume_lag: int | None = None
    stale_after_s: float = DEFAULT_STALE_AFTER_S

    def __post_init__(self) -> None:
        if self.max_lag < 0:
            raise ConfigurationError(f"the channel lag bound must be >= 0, got {self.max_lag}")
        if self.resume_lag is not None and not 0 <= self.resume_lag <= self.max_lag:
            raise ConfigurationError(
                f"resume lag {self.resume_lag} must be in 0..{self.max_lag} (the bound)"
            )
        if not self.stale_after_s > 0:
            raise ConfigurationError(f"stale_after_s must be > 0, got {self.stale_after_s}")

    @property
    def enabled(self) -> bool:
        return self.max_lag > 0

    @property
    def resume_at(self) -> int:
        return self.max_lag // 2 if self.resume_lag is None else self.resume_lag


# -- events ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Probed:
    """A probe's answer, read at time `at` (seconds, any monotonic clock).

    `ends`: the end offset of every channel the subtask writes; `positions`:
    the position each channel's reader last reported (missing: none yet);
    `starts`: the first offset of channels whose reader reported none;
    `delivered`: per channel, how many of the records the writer counts in
    `Wrote.written` were delivered (the broker acknowledged them) when the
    probe began, so that `ends` includes at least these.
    """

    at: float
    ends: Mapping[Channel, int]
    positions: Mapping[Channel, int]
    starts: Mapping[Channel, int] = field(default_factory=dict)
    delivered: Mapping[Channel, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Wrote:
    """The writer's own counts: channel records it wrote into each channel since it
    opened, and the input records it read meanwhile (`read`, for `FlowGate.read_limit`)."""

    written: Mapping[Channel, int]
    read: int = 0


@dataclass(frozen=True, slots=True)
class Opened:
    """The subtask starts reading at `now` (same clock as `Probed.at`)."""

    now: float


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: it is `now` (same clock as `Probed.at`)."""

    now: float


FlowEvent = Opened | Probed | Tick | Wrote


# -- actions -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pause:
    """Stop reading the inputs: the channels hold `lag` records on `channel`
    (None: their lag is not known yet)."""

    channel: Channel | None
    lag: int


@dataclass(frozen=True, slots=True)
class Resume:
    """Read the inputs again."""


FlowAction = Pause | Resume


def channel_lags(
    ends: Mapping[Channel, int],
    positions: Mapping[Channel, int],
    starts: Mapping[Channel, int] | None = None,
) -> dict[Channel, int]:
    """Per channel of `ends`, its lag: end minus reported position, at least 0.

    A channel without a valid (non-negative) position counts from its start
    in `starts`, and has no lag if that is missing too. A position past the
    end (a reader's report from before the topic was purged or recreated)
    counts as no lag.
    """
    lags = {}
    for ch, end in ends.items():
        pos = _position(ch, positions, starts or {})
        lags[ch] = max(0, end - pos) if pos >= 0 else 0
    return lags


def _position(ch: Channel, positions: Mapping[Channel, int], starts: Mapping[Channel, int]) -> int:
    """Where channel `ch`'s reader is: its reported position, else the channel's
    start (a reader that has not reported yet); -1 if neither is known."""
    pos = positions.get(ch, -1)
    return pos if pos >= 0 else starts.get(ch, -1)


def still_drained(latest: Probed, delivered: Mapping[Channel, int]) -> bool:
    """Whether a new probe would find what `latest` found: every channel drained.

    True when `latest` saw each channel's reader at or past its end, and the
    writer has had nothing more delivered since (`delivered`, its counts now).
    Each channel has one writer, so its end moves only with that writer's
    deliveries, and a reader's position only forward: the channels are still
    empty, and asking the cluster again (two requests per probe, every
    `PROBE_INTERVAL_S`, most of what an idle job asks the broker) tells nothing.
    Records produced and not yet delivered are the gate's to count (`Wrote`).
    """
    if dict(delivered) != dict(latest.delivered):
        return False
    return all(
        _position(ch, latest.positions, latest.starts) >= end for ch, end in latest.ends.items()
    )


class FlowGate:
    """Whether one subtask reads its inputs, from the lag of the channels it writes."""

    def __init__(self, config: FlowConfig) -> None:
        self.config = config
        self.paused = False
        #: When the latest probe applied was read (None: none yet).
        self.probed_at: float | None = None
        #: When the subtask started reading (None: not yet).
        self.opened_at: float | None = None
        #: Lag per channel at the latest probe.
        self.lags: dict[Channel, int] = {}
        #: The writer's records delivered when the latest probe began.
        self._delivered_at_probe: Mapping[Channel, int] = {}
        #: The counts and reads at the previous `Wrote`: one turn's difference.
        self._written_before: Mapping[Channel, int] = {}
        self._read_before = 0
        #: Channel records one input record made, on the channel it made most
        #: of (None: nothing read yet).
        self.fanout: float | None = None
        #: Resumed because no probe answered for `stale_after_s`: the lags are
        #: not known, so reads are not sized by them either.
        self.blind = False

    def handle(self, event: FlowEvent) -> list[FlowAction]:
        match event:
            case Opened():
                if not self.config.enabled or self.opened_at is not None:
                    return []
                self.opened_at = event.now
                if self.probed_at is not None or self.paused:
                    return []
                self.paused = True
                return [Pause(None, 0)]
            case Probed():
                return self._probed(event)
            case Tick():
                return self._tick(event.now)
            case Wrote():
                self._learn_fanout(event)
                return self._wrote(event.written)
            case _:
                assert_never(event)

    def _probed(self, event: Probed) -> list[FlowAction]:
        if self.probed_at is not None and event.at < self.probed_at:
            return []  # an older answer overtaken by a newer one
        self.probed_at = event.at
        self.blind = False
        self.lags = channel_lags(event.ends, event.positions, event.starts)
        self._delivered_at_probe = event.delivered
        if not self.config.enabled:
            return []
        # Records the writer handed that the probe could not see yet count too:
        # resuming on the probe's lag alone let a writer whose producer was slow
        # to deliver read on and on while its channels grew past the bound.
        held = {**self.lags, **self.estimate(self._written_before)}
        worst = max(held.items(), key=lambda kv: (kv[1], kv[0]), default=None)
        if worst is None:
            return self._resume()
        channel, lag = worst
        if not self.paused and lag > self.config.max_lag:
            self.paused = True
            return [Pause(channel, lag)]
        if self.paused and lag <= self.config.resume_at:
            return self._resume()
        return []

    def _wrote(self, written: Mapping[Channel, int]) -> list[FlowAction]:
        if self.paused or not self.config.enabled:
            return []
        for ch, lag in sorted(self.estimate(written).items()):
            if lag > self.config.max_lag:
                self.paused = True
                return [Pause(ch, lag)]
        return []

    def _learn_fanout(self, event: Wrote) -> None:
        read = event.read - self._read_before
        before = self._written_before
        most = max((n - before.get(ch, 0) for ch, n in event.written.items()), default=0)
        # A turn ends with a partial batch in each channel it wrote, so its k
        # records for n read say n * fanout <= k <= n * fanout + 1: k / n errs
        # high by at most 1 / n, never low (low would let the next read overfill).
        # A turn of one record per channel says only that fewer than one came
        # per input record read, and only for that turn's records: input records
        # differ in size (a source's partial batches reach the next stage as
        # channel records of a few stream records), so the estimate falls towards
        # 1 / read by at most the decay per turn, like any fall. Dropping to it at
        # once let a turn of a few small records size the next read of full ones
        # several times too large. (A barrier's record can make a short turn look
        # like a large fan-out: the next turns bring it down.)
        if read > 0 and most > 1:
            turn = most / read
            self.fanout = turn if self.fanout is None else max(turn, self.fanout * FANOUT_DECAY)
        elif read > 0 and self.fanout is not None:
            self.fanout = max(self.fanout * FANOUT_DECAY, min(self.fanout, 1 / read))
        self._written_before = dict(event.written)
        self._read_before = event.read

    def estimate(self, written: Mapping[Channel, int]) -> dict[Channel, int]:
        """Per channel, what it holds now as far as the gate knows: the latest
        probe's lag plus what the writer wrote beyond what had been delivered
        when that probe began."""
        since = self._delivered_at_probe
        return {
            ch: self.lags.get(ch, 0) + max(0, n - since.get(ch, 0)) for ch, n in written.items()
        }

    def read_limit(self, default: int) -> int:
        """How many input records the subtask may read next (1..`default`).

        The room below the bound on the fullest channel (after the latest
        `Wrote`), divided by the fan-out, but at least what fills one channel
        record: every channel stays within the bound plus that record, the
        turn's partial batch and one input record's worth. `default`
        while flow control is off, the gate is paused (nothing is read but
        what a pause leaves alone), it resumed blind (no probe answers) or
        nothing was read yet.
        """
        if not self.config.enabled or self.paused or self.blind or not self.fanout:
            return default
        fullest = max(self.estimate(self._written_before).values(), default=0)
        # Less the turn's partial batch, which comes whatever is read.
        room = self.config.max_lag - fullest - 1
        # Never less than what fills one channel record: reads of a line or two
        # near the bound would each end in a record of a few stream records,
        # and the channels would fill their bound with those (measured: the
        # word count's exactly-once latency p99 tripled at a steady rate).
        least = math.ceil(1 / self.fanout)
        return min(default, max(least, int(room / self.fanout)))

    def _tick(self, now: float) -> list[FlowAction]:
        if not self.paused:
            return []
        heard = self.probed_at if self.probed_at is not None else self.opened_at
        if heard is None or now - heard > self.config.stale_after_s:
            self.blind = True
            return self._resume()
        return []

    def _resume(self) -> list[FlowAction]:
        if not self.paused:
            return []
        self.paused = False
        return [Resume()]
