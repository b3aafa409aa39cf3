"""The control messages between `kstream savepoint` and a job's runner (pure, no I/O).

Part of `kstream.protocol.messages`, which lists them with the others and decodes
them (kept apart for that module's length).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from kstream.protocol.message_fields import float_or_none, int_or_none, str_, str_or

__all__ = ["SavepointDone", "SavepointRequested"]

Wire: TypeAlias = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SavepointRequested:
    """`kstream savepoint` asks the job's coordinator for savepoint `request` (an id of
    its own), written to `target` ("": the default place) and, with `stop`, a clean
    stop of the job once it is written (`kstream.runtime.runner.savepoints`)."""

    TYPE: ClassVar[str] = "savepoint"

    request: str
    target: str = ""
    stop: bool = False
    time: float | None = None

    def to_dict(self) -> Wire:
        return {
            "type": self.TYPE,
            "request": self.request,
            "target": self.target,
            "stop": self.stop,
            "time": self.time,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SavepointRequested:
        return cls(
            str_(raw, "request"),
            str_or(raw, "target", ""),
            raw.get("stop") is True,
            float_or_none(raw, "time"),
        )


@dataclass(frozen=True, slots=True)
class SavepointDone:
    """The outcome of savepoint `request`: written at `url` from `checkpoint`, or
    failed for `error` (one line; then `url` is "")."""

    TYPE: ClassVar[str] = "savepoint-done"

    request: str
    checkpoint: int | None = None
    url: str = ""
    error: str = ""
    time: float | None = None

    def to_dict(self) -> Wire:
        return {
            "type": self.TYPE,
            "request": self.request,
            "checkpoint": self.checkpoint,
            "url": self.url,
            "error": self.error,
            "time": self.time,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SavepointDone:
        return cls(
            str_(raw, "request"),
            int_or_none(raw, "checkpoint"),
            str_or(raw, "url", ""),
            str_or(raw, "error", ""),
            float_or_none(raw, "time"),
        )
