"""Reading the fields of a control message's JSON object (pure): each raises
`ProtocolError` naming the message type and field when it is missing or of the
wrong type. Used by `kstream.protocol.messages` and `kstream.protocol.savepoint_messages`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kstream.errors import ProtocolError

__all__ = [
    "float_or",
    "float_or_none",
    "int_",
    "int_or",
    "int_or_none",
    "is_int",
    "malformed",
    "str_",
    "str_or",
]


def malformed(raw: Mapping[str, Any], key: str, want: str) -> ProtocolError:
    return ProtocolError(
        f"control message {raw.get('type')!r}: {key} must be {want}, got {raw.get(key)!r}"
    )


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def int_(raw: Mapping[str, Any], key: str) -> int:
    value = raw.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise malformed(raw, key, "an integer")
    return value


def int_or_none(raw: Mapping[str, Any], key: str) -> int | None:
    return None if raw.get(key) is None else int_(raw, key)


def int_or(raw: Mapping[str, Any], key: str, default: int) -> int:
    return default if raw.get(key) is None else int_(raw, key)


def float_or_none(raw: Mapping[str, Any], key: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if not (is_int(value) or isinstance(value, float)):
        raise malformed(raw, key, "a number")
    return float(value)


def float_or(raw: Mapping[str, Any], key: str, default: float) -> float:
    value = float_or_none(raw, key)
    return default if value is None else value


def str_(raw: Mapping[str, Any], key: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str):
        raise malformed(raw, key, "a string")
    return value


def str_or(raw: Mapping[str, Any], key: str, default: str) -> str:
    return default if raw.get(key) is None else str_(raw, key)
