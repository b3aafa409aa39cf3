"""The control messages between `kstream savepoint` and a job's runner (pure, no I/O).

Part of `kstream.protocol.messages` (which lists them with the others and decodes
them); kept here for their own reading of fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from kstream.errors import ProtocolError

__all__ = ["SavepointDone", "SavepointRequested"]

Wire: TypeAlias = dict[str, Any]


def _get(raw: Mapping[str, Any], key: str, kinds: tuple[type, ...], want: str) -> Any:
    value = raw.get(key)
    if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
        raise ProtocolError(
            f"control message {raw.get('type')!r}: {key} must be {want}, got {value!r}"
        )
    return value


def _str(raw: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = _get(raw, key, (str,), "a string")
    if value is None:
        if default is None:
            raise ProtocolError(f"control message {raw.get('type')!r}: {key} is missing")
        return default
    return str(value)


def _number(raw: Mapping[str, Any], key: str) -> float | None:
    value = _get(raw, key, (int, float), "a number")
    return None if value is None else float(value)


def _int(raw: Mapping[str, Any], key: str) -> int | None:
    value = _get(raw, key, (int,), "an integer")
    return None if value is None else int(value)


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
            _str(raw, "request"),
            _str(raw, "target", ""),
            raw.get("stop") is True,
            _number(raw, "time"),
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
            _str(raw, "request"),
            _int(raw, "checkpoint"),
            _str(raw, "url", ""),
            _str(raw, "error", ""),
            _number(raw, "time"),
        )
