"""The messages of a job's control topic, one frozen class per type (pure, no I/O).

Each class owns its wire form: `to_dict` gives the JSON object written to the
topic (``type`` plus the fields below, in this order), `from_dict` reads one
back and raises `ProtocolError` when a field is missing or of the wrong type.
`decode` is what readers use: it turns any JSON value into a message, or into
None (with a logged warning) when the value is of an unknown type or malformed,
so a stray record never stops a reader.

=============== ====================== ============================================
class           ``type`` on the wire   fields
=============== ====================== ============================================
`Recovered`     recover                generation, checkpoint (or null), reason,
                                       time, fresh (only written when true)
`Triggered`     trigger                checkpoint, generation, time
`Initiated`     initiate               checkpoint, generation, task, time
`Acked`         ack                    checkpoint, generation, task, size,
                                       alignment_ms, sync_ms, channel_offsets,
                                       source_offsets (unaligned, in_flight,
                                       marker_offsets, cut_on when set)
`Declined`      decline                checkpoint, generation, task, reason
`Completed`     complete               checkpoint, generation, duration_s, size,
                                       alignment_ms, time, identity
`Aborted`       abort                  checkpoint, generation, reason, time
`WorkerAlive`   heartbeat              worker, generation, time, process,
                                       counters {in, out, dead_letters, replayed}, dead_letter
                                       (alignment when set: `kstream.protocol.worker_alive`)
`WorkerFailed`  failed                 worker, reason
`RestoreFailed` restore-failed         worker, generation, checkpoint, reason
`Presence`      coordinator            incarnation, pid, host, state_dir, time, stopped, every
`SavepointRequested` savepoint        request, target, stop, time
`SavepointDone` savepoint-done         request, checkpoint (or null), url, error, time
=============== ====================== ============================================

Who writes which, and what they mean, is told in `kstream.runtime.control`.
Reading is lenient where the readers always were: fields written by every
kstream version are required; the others (times, statistics, a heartbeat's
counters, a completion's identity) read as None or a default when absent, and
a malformed identity or counters object reads as None rather than losing the
message (the history of checkpoints must survive it).

Offsets maps (`Acked`) have integer partitions; JSON object keys are strings,
so `to_dict` writes them as strings and `from_dict` turns them back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias, assert_never

from kstream.errors import ProtocolError
from kstream.protocol.identity import JobIdentity
from kstream.protocol.message_fields import (
    float_or as _float_or,
)
from kstream.protocol.message_fields import (
    float_or_none as _float_or_none,
)
from kstream.protocol.message_fields import (
    int_ as _int,
)
from kstream.protocol.message_fields import (
    int_or as _int_or,
)
from kstream.protocol.message_fields import (
    int_or_none as _int_or_none,
)
from kstream.protocol.message_fields import (
    malformed as _malformed,
)
from kstream.protocol.message_fields import (
    str_ as _str,
)
from kstream.protocol.message_fields import (
    str_or as _str_or,
)
from kstream.protocol.savepoint_messages import SavepointDone, SavepointRequested
from kstream.protocol.worker_alive import WorkerAlive

__all__ = [
    "Aborted",
    "Acked",
    "Completed",
    "ControlMessage",
    "Declined",
    "Initiated",
    "Offsets",
    "Presence",
    "Recovered",
    "RestoreFailed",
    "SavepointDone",
    "SavepointRequested",
    "Triggered",
    "WorkerAlive",
    "WorkerFailed",
    "checkpoint_of",
    "decode",
    "decode_all",
    "generation_of",
]

log = logging.getLogger("kstream.control")

#: Offsets per topic and partition.
Offsets: TypeAlias = dict[str, dict[int, int]]
#: A message's JSON object.
Wire: TypeAlias = dict[str, Any]


# -- reading fields ------------------------------------------------------------


def _offsets(raw: Mapping[str, Any], key: str) -> Offsets:
    value = raw.get(key)
    if value is None:
        return {}
    try:
        return {
            str(topic): {int(p): int(o) for p, o in dict(parts).items()}
            for topic, parts in dict(value).items()
        }
    except (AttributeError, TypeError, ValueError):
        raise _malformed(raw, key, "offsets by topic and partition") from None


def _offsets_wire(offsets: Offsets) -> dict[str, dict[str, int]]:
    return {topic: {str(p): o for p, o in parts.items()} for topic, parts in offsets.items()}


def _identity(raw: Mapping[str, Any]) -> JobIdentity | None:
    value = raw.get("identity")
    if not isinstance(value, Mapping):
        return None
    try:
        return JobIdentity.from_json(value)
    except ValueError:
        return None  # unreadable: the completion counts, its identity is unknown


# -- the messages --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recovered:
    """Every subtask rolls back to `checkpoint` (None: the start) in `generation`.

    `fresh`: the job starts over, forgetting every older checkpoint.
    `restated`: a copy of the generation's `recover`, written so that the
    control topic can be purged behind it (workers joining later read it;
    :ref:`internal-topics-bounded`); it is no rollback.
    """

    TYPE: ClassVar[str] = "recover"

    generation: int
    checkpoint: int | None
    reason: str = ""
    time: float | None = None
    fresh: bool = False
    restated: bool = False
    #: (worker, process) pairs: the incarnation the coordinator keeps for an index
    #: two processes claimed (`WorkerAlive.process`); any other process of that
    #: worker stops. Empty: no claim is settled by this rollback.
    kept: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> Wire:
        out: Wire = {
            "type": self.TYPE,
            "generation": self.generation,
            "checkpoint": self.checkpoint,
            "reason": self.reason,
            "time": self.time,
        }
        if self.fresh:
            out["fresh"] = True
        if self.restated:
            out["restated"] = True
        if self.kept:
            out["kept"] = dict(self.kept)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Recovered:
        return cls(
            _int(raw, "generation"),
            _int_or_none(raw, "checkpoint"),
            _str_or(raw, "reason", ""),
            _float_or_none(raw, "time"),
            raw.get("fresh") is True,
            raw.get("restated") is True,
            _kept(raw),
        )


@dataclass(frozen=True, slots=True)
class Triggered:
    """Checkpoint `checkpoint` starts: sources record offsets and emit barriers."""

    TYPE: ClassVar[str] = "trigger"

    checkpoint: int
    generation: int
    time: float | None = None

    def to_dict(self) -> Wire:
        return {
            "type": self.TYPE,
            "checkpoint": self.checkpoint,
            "generation": self.generation,
            "time": self.time,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Triggered:
        return cls(_int(raw, "checkpoint"), _int(raw, "generation"), _float_or_none(raw, "time"))


@dataclass(frozen=True, slots=True)
class Initiated:
    """Source subtask `task` started checkpoint `checkpoint` itself and took its snapshot.

    Written (and flushed) before its barriers, so every ack of `checkpoint`
    follows it in the control topic. Its id is a Lamport clock
    (`kstream.protocol.snapshot_id`).
    """

    TYPE: ClassVar[str] = "initiate"

    checkpoint: int
    generation: int
    task: str
    time: float | None = None

    def to_dict(self) -> Wire:
        return {
            "type": self.TYPE,
            "checkpoint": self.checkpoint,
            "generation": self.generation,
            "task": self.task,
            "time": self.time,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Initiated:
        checkpoint = _int(raw, "checkpoint")
        if checkpoint < 1:
            raise _malformed(raw, "checkpoint", "a positive integer")
        return cls(
            checkpoint, _int(raw, "generation"), _str(raw, "task"), _float_or_none(raw, "time")
        )


@dataclass(frozen=True, slots=True)
class Acked:
    """Subtask `task` stored its snapshot of `checkpoint` (`size` bytes of state).

    `unaligned`: the snapshot was taken before barrier `checkpoint` had arrived
    on every input channel (the unaligned rule, from the first barrier or after
    the alignment timeout), so it recorded channel state; `in_flight`: how many
    channel records that state holds (the offset span of its recorded ranges).
    `marker_offsets`: per commit-marker partition of the subtask's sinks, the
    offset of the newest marker known to be committed when the snapshot was
    taken (the records before it may be purged). `cut_on`: how the subtask
    joined the snapshot (`kstream.protocol.cuts.Cut.encode`: started, injected,
    on the marker of which channel; empty when written by an older kstream).
    """

    TYPE: ClassVar[str] = "ack"

    checkpoint: int
    generation: int
    task: str
    size: int = 0
    alignment_ms: float = 0.0
    sync_ms: float = 0.0
    channel_offsets: Offsets = field(default_factory=dict)
    source_offsets: Offsets = field(default_factory=dict)
    unaligned: bool = False
    in_flight: int = 0
    marker_offsets: Offsets = field(default_factory=dict)
    cut_on: str = ""
    #: The subtask did nothing since its previous ack: no record read, written,
    #: dead-lettered or dropped, no timer fired (`Subtask.activity`;
    #: {ref}`coordinator-idle`). Absent on the wire unless set.
    quiet: bool = False

    def to_dict(self) -> Wire:
        wire: Wire = {
            "type": self.TYPE,
            "checkpoint": self.checkpoint,
            "generation": self.generation,
            "task": self.task,
            "size": self.size,
            "alignment_ms": self.alignment_ms,
            "sync_ms": self.sync_ms,
            "channel_offsets": _offsets_wire(self.channel_offsets),
            "source_offsets": _offsets_wire(self.source_offsets),
        }
        if self.unaligned or self.in_flight:
            # Only then: an aligned snapshot's ack keeps the bytes it always had.
            wire["unaligned"] = self.unaligned
            wire["in_flight"] = self.in_flight
        if self.marker_offsets:
            wire["marker_offsets"] = _offsets_wire(self.marker_offsets)
        if self.cut_on:
            wire["cut_on"] = self.cut_on
        if self.quiet:
            wire["quiet"] = True
        return wire

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Acked:
        return cls(
            _int(raw, "checkpoint"),
            _int(raw, "generation"),
            _str(raw, "task"),
            _int_or(raw, "size", 0),
            _float_or(raw, "alignment_ms", 0.0),
            _float_or(raw, "sync_ms", 0.0),
            _offsets(raw, "channel_offsets"),
            _offsets(raw, "source_offsets"),
            raw.get("unaligned") is True,
            _int_or(raw, "in_flight", 0),
            _offsets(raw, "marker_offsets"),
            _str_or(raw, "cut_on", ""),
            raw.get("quiet") is True,
        )


@dataclass(frozen=True, slots=True)
class Declined:
    """Subtask `task` could not take `checkpoint`, for `reason`."""

    TYPE: ClassVar[str] = "decline"

    checkpoint: int
    generation: int
    task: str
    reason: str = ""

    def to_dict(self) -> Wire:
        return {
            "type": self.TYPE,
            "checkpoint": self.checkpoint,
            "generation": self.generation,
            "task": self.task,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Declined:
        return cls(
            _int(raw, "checkpoint"),
            _int(raw, "generation"),
            _str(raw, "task"),
            _str_or(raw, "reason", ""),
        )


@dataclass(frozen=True, slots=True)
class Completed:
    """Every subtask acked `checkpoint`: it is a restore point of the job `identity`."""

    TYPE: ClassVar[str] = "complete"

    checkpoint: int
    generation: int
    duration_s: float | None = None
    size: int | None = None
    alignment_ms: float | None = None
    time: float | None = None
    identity: JobIdentity | None = None

    def to_dict(self) -> Wire:
        return {
            "type": self.TYPE,
            "checkpoint": self.checkpoint,
            "generation": self.generation,
            "duration_s": self.duration_s,
            "size": self.size,
            "alignment_ms": self.alignment_ms,
            "time": self.time,
            "identity": None if self.identity is None else self.identity.to_json(),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Completed:
        return cls(
            _int(raw, "checkpoint"),
            _int(raw, "generation"),
            _float_or_none(raw, "duration_s"),
            _int_or_none(raw, "size"),
            _float_or_none(raw, "alignment_ms"),
            _float_or_none(raw, "time"),
            _identity(raw),
        )


@dataclass(frozen=True, slots=True)
class Aborted:
    """Checkpoint `checkpoint` is given up, for `reason`."""

    TYPE: ClassVar[str] = "abort"

    checkpoint: int
    generation: int
    reason: str = ""
    time: float | None = None

    def to_dict(self) -> Wire:
        return {
            "type": self.TYPE,
            "checkpoint": self.checkpoint,
            "generation": self.generation,
            "reason": self.reason,
            "time": self.time,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Aborted:
        return cls(
            _int(raw, "checkpoint"),
            _int(raw, "generation"),
            _str_or(raw, "reason", ""),
            _float_or_none(raw, "time"),
        )


@dataclass(frozen=True, slots=True)
class WorkerFailed:
    """Worker `worker` stopped the job: an error its policy says not to skip."""

    TYPE: ClassVar[str] = "failed"

    worker: str
    reason: str

    def to_dict(self) -> Wire:
        return {"type": self.TYPE, "worker": self.worker, "reason": self.reason}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WorkerFailed:
        return cls(_str(raw, "worker"), _str_or(raw, "reason", ""))


@dataclass(frozen=True, slots=True)
class RestoreFailed:
    """Worker `worker` could not restore `checkpoint` in `generation`, for `reason`."""

    TYPE: ClassVar[str] = "restore-failed"

    worker: str
    generation: int
    checkpoint: int | None
    reason: str = ""

    def to_dict(self) -> Wire:
        return {
            "type": self.TYPE,
            "worker": self.worker,
            "generation": self.generation,
            "checkpoint": self.checkpoint,
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RestoreFailed:
        return cls(
            _str(raw, "worker"),
            _int(raw, "generation"),
            _int_or_none(raw, "checkpoint"),
            _str_or(raw, "reason", ""),
        )


@dataclass(frozen=True, slots=True)
class Presence:
    """One announcement of a coordinator (the runner of `kstream run`).

    What runners make of them: `kstream.protocol.presence`.
    """

    TYPE: ClassVar[str] = "coordinator"

    incarnation: str
    pid: int
    host: str
    state_dir: str
    time: float
    stopped: bool = False
    #: The longest time, in seconds, until this runner's next announcement (an
    #: idle job announces itself less often; a message without it: one second).
    every: float = 1.0

    def to_dict(self) -> Wire:
        return {
            "type": self.TYPE,
            "incarnation": self.incarnation,
            "pid": self.pid,
            "host": self.host,
            "state_dir": self.state_dir,
            "time": self.time,
            "stopped": self.stopped,
            "every": self.every,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Presence:
        when = _float_or_none(raw, "time")
        if when is None:
            raise _malformed(raw, "time", "a number")
        return cls(
            _str(raw, "incarnation"),
            _int(raw, "pid"),
            _str(raw, "host"),
            _str(raw, "state_dir"),
            when,
            raw.get("stopped") is True,
            every if (every := _float_or(raw, "every", 1.0)) > 0 else 1.0,
        )

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, state dir {self.state_dir}"


ControlMessage: TypeAlias = (
    Recovered
    | Triggered
    | Initiated
    | Acked
    | Declined
    | Completed
    | Aborted
    | WorkerAlive
    | WorkerFailed
    | RestoreFailed
    | Presence
    | SavepointRequested
    | SavepointDone
)

_READERS: dict[str, Callable[[Mapping[str, Any]], ControlMessage]] = {
    cls.TYPE: cls.from_dict
    for cls in (
        Recovered,
        Triggered,
        Initiated,
        Acked,
        Declined,
        Completed,
        Aborted,
        WorkerAlive,
        WorkerFailed,
        RestoreFailed,
        Presence,
        SavepointRequested,
        SavepointDone,
    )
}


def _kept(raw: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    kept = raw.get("kept", {})
    if not isinstance(kept, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in kept.items()
    ):
        raise ProtocolError(f"'kept' must map workers to process ids, got {kept!r:.100}")
    return tuple(sorted(kept.items()))


def decode(raw: object) -> ControlMessage | None:
    """The message `raw` (a decoded JSON value) is; None, with a warning, if it is none."""
    if not isinstance(raw, Mapping):
        log.warning("ignoring control record that is not a JSON object: %.200r", raw)
        return None
    kind = raw.get("type")
    read = _READERS.get(kind) if isinstance(kind, str) else None
    if read is None:
        log.warning("ignoring control message of unknown type %.100r", kind)
        return None
    try:
        return read(raw)
    except ProtocolError as exc:
        log.warning("ignoring malformed control message: %s", exc)
        return None


def decode_all(raws: Iterable[object]) -> list[ControlMessage]:
    """The messages among `raws`, in order (see `decode`)."""
    return [m for m in map(decode, raws) if m is not None]


def generation_of(message: ControlMessage) -> int | None:
    """The generation `message` belongs to (None: it belongs to none)."""
    match message:
        case (
            Recovered()
            | Triggered()
            | Initiated()
            | Acked()
            | Declined()
            | Completed()
            | Aborted()
            | WorkerAlive()
            | RestoreFailed()
        ):
            return message.generation
        case WorkerFailed() | Presence():
            return None
        case SavepointRequested() | SavepointDone():
            return None
        case _:
            assert_never(message)


def checkpoint_of(message: ControlMessage) -> int | None:
    """The checkpoint `message` names (None: it names none)."""
    match message:
        case (
            Recovered()
            | Triggered()
            | Initiated()
            | Acked()
            | Declined()
            | Completed()
            | Aborted()
            | RestoreFailed()
        ):
            return message.checkpoint
        case WorkerAlive() | WorkerFailed() | Presence():
            return None
        case SavepointDone():
            return message.checkpoint
        case SavepointRequested():
            return None
        case _:
            assert_never(message)
