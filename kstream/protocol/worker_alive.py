"""The worker's heartbeat message (``heartbeat`` on the wire) and its alignment report (pure).

Re-exported by `kstream.protocol.messages`, where every control message is
listed. `SubtaskAlignment` is what a heartbeat says about a subtask that is
aligning a barrier or recording channel state at the moment it is sent (the
dashboard's "checkpoints in flight"): which input channels delivered the
barrier (and the offset after it), and which are being recorded, from which
offset. Bounded: at most `MAX_CHANNELS` channels per list (the count of all
is kept), and only subtasks that are aligning or recording appear.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from kstream.protocol.counters import WorkerCounters
from kstream.protocol.message_fields import float_or_none as _float_or_none
from kstream.protocol.message_fields import int_ as _int
from kstream.protocol.message_fields import int_or as _int_or
from kstream.protocol.message_fields import str_ as _str
from kstream.protocol.message_fields import str_or as _str_or

__all__ = ["MAX_CHANNELS", "SubtaskAlignment", "WorkerAlive"]

#: Channels listed per list of a `SubtaskAlignment` (a heartbeat stays small).
MAX_CHANNELS = 32

Wire: TypeAlias = dict[str, Any]


def _channels(raw: object) -> tuple[tuple[str, int], ...]:
    """``{"topic[p]": offset}`` read leniently (a report is no reason to drop a heartbeat)."""
    if not isinstance(raw, Mapping):
        return ()
    return tuple(
        (k, v)
        for k, v in raw.items()
        if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
    )[:MAX_CHANNELS]


@dataclass(frozen=True, slots=True)
class SubtaskAlignment:
    """Subtask `task` at a heartbeat: aligning `checkpoint` (None: not aligning) and
    recording channel state for `recording_for` (None: not recording).

    `arrived`: ``(channel, offset after its barrier)`` of the channels that
    delivered barrier `checkpoint`, of `channels` input channels in all.
    `recording`: ``(channel, offset at the snapshot)`` of the channels whose
    records are being recorded until their barrier of `recording_for` comes.
    """

    task: str
    channels: int
    checkpoint: int | None = None
    arrived: tuple[tuple[str, int], ...] = ()
    recording_for: int | None = None
    recording: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(
        cls,
        task: str,
        channels: int,
        checkpoint: int | None,
        arrived: Iterable[tuple[str, int]],
        recording_for: int | None,
        recording: Iterable[tuple[str, int]],
    ) -> SubtaskAlignment:
        """A report with each list sorted and cut to `MAX_CHANNELS`."""
        return cls(
            task,
            channels,
            checkpoint,
            tuple(sorted(arrived))[:MAX_CHANNELS],
            recording_for,
            tuple(sorted(recording))[:MAX_CHANNELS],
        )

    def to_wire(self) -> Wire:
        return {
            "task": self.task,
            "channels": self.channels,
            "checkpoint": self.checkpoint,
            "arrived": dict(self.arrived),
            "recording_for": self.recording_for,
            "recording": dict(self.recording),
        }

    @classmethod
    def from_wire(cls, raw: object) -> SubtaskAlignment | None:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("task"), str):
            return None
        channels, checkpoint, recording_for = (
            raw.get("channels"),
            raw.get("checkpoint"),
            raw.get("recording_for"),
        )
        return cls(
            raw["task"],
            channels if isinstance(channels, int) else 0,
            checkpoint if isinstance(checkpoint, int) else None,
            _channels(raw.get("arrived")),
            recording_for if isinstance(recording_for, int) else None,
            _channels(raw.get("recording")),
        )


@dataclass(frozen=True, slots=True)
class WorkerAlive:
    """Worker `worker` runs `generation`; process `process` has done `counters` so far.

    `dead_letter` describes the latest record it dead-lettered ("" if none).
    `restoring`: the worker is alive in `generation` but still restoring its
    subtasks (its heartbeat thread speaks for it meanwhile); absent in
    messages of earlier versions, read as False. `stuck`: one line naming a
    call of the job's code that has not returned for long (subtask, function,
    record, where), and `stuck_on` what identifies that call across processes
    (`kstream.runtime.worker.stuck`); "" when none, and then absent on the wire.
    `waiting`: the process has not joined `generation` and never will: another
    process of its index runs it (`kstream.protocol.recovery`), so this one
    waits for the next `recover`; the coordinator opens one for it at once
    (a claim). Absent on the wire unless set.
    """

    TYPE: ClassVar[str] = "heartbeat"

    worker: str
    generation: int
    time: float | None = None
    process: str | None = None
    counters: WorkerCounters | None = None
    dead_letter: str = ""
    restoring: bool = False
    stuck: str = ""
    stuck_on: str = ""
    waiting: bool = False
    #: A snapshot the checkpoint storage has been slow to take, in one line ("" none;
    #: absent on the wire then): checkpoints it holds up roll nothing back.
    storing: str = ""
    #: Its subtasks aligning a barrier or recording channel state now (absent on
    #: the wire when none; see `SubtaskAlignment`).
    alignment: tuple[SubtaskAlignment, ...] = ()
    #: The checkpoint after whose quiet ack the worker did something again: sent
    #: once, at once, never repeated by the heartbeat thread (0: none; absent on the
    #: wire then; {ref}`coordinator-idle`).
    woke: int = 0

    def to_dict(self) -> Wire:
        wire: Wire = {
            "type": self.TYPE,
            "worker": self.worker,
            "generation": self.generation,
            "time": self.time,
            "process": self.process,
            "counters": None if self.counters is None else self.counters.to_message(),
            "dead_letter": self.dead_letter,
        }
        if self.restoring:
            # Only when set: a running worker's heartbeat keeps the bytes it always had.
            wire["restoring"] = True
        if self.stuck:
            wire["stuck"] = self.stuck
            wire["stuck_on"] = self.stuck_on
        if self.waiting:
            wire["waiting"] = True
        if self.storing:
            wire["storing"] = self.storing
        if self.alignment:
            wire["alignment"] = [a.to_wire() for a in self.alignment]
        if self.woke:
            wire["woke"] = self.woke
        return wire

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WorkerAlive:
        process = raw.get("process")
        dead_letter = raw.get("dead_letter")
        return cls(
            _str(raw, "worker"),
            _int(raw, "generation"),
            _float_or_none(raw, "time"),
            process if isinstance(process, str) else None,
            WorkerCounters.from_message(raw.get("counters")),
            dead_letter if isinstance(dead_letter, str) else "",
            raw.get("restoring") is True,
            _str_or(raw, "stuck", ""),
            _str_or(raw, "stuck_on", ""),
            raw.get("waiting") is True,
            _str_or(raw, "storing", ""),
            _alignment(raw.get("alignment")),
            _int_or(raw, "woke", 0),
        )


def _alignment(raw: object) -> tuple[SubtaskAlignment, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(a for a in map(SubtaskAlignment.from_wire, raw) if a is not None)
