"""Serialization of record keys and values: pluggable, with bytes, str and JSON built in.

A `Serde` turns Python values into bytes and back. Sources decode with one,
sinks encode with one; a `DecodeError` raised by `loads` is handled by the
job's error policy (dead letter, skip or fail), never by crashing the worker.
"""

from __future__ import annotations

import json
import pickle
from typing import Any, Protocol

from kstream.dataflow.types import T
from kstream.errors import ConfigurationError, DecodeError, RecordError

__all__ = ["BYTES", "JSON", "PICKLE", "STR", "DecodeError", "Serde", "serde"]


class Serde(Protocol[T]):
    """Converts between Python values of type `T` and bytes. Implementations must be
    picklable. A bare `Serde` is ``Serde[Any]`` (the built-in ones are)."""

    name: str

    def dumps(self, value: T) -> bytes | None: ...

    def loads(self, data: bytes | None) -> T: ...


class BytesSerde:
    """Bytes unchanged (None stays None)."""

    name = "bytes"

    def dumps(self, value: Any) -> bytes | None:
        if value is None or isinstance(value, bytes):
            return value
        raise RecordError(f"bytes serde got {type(value).__name__}, expected bytes")

    def loads(self, data: bytes | None) -> Any:
        return data


def _has_text_form(value: Any) -> bool:
    """Whether `str(value)` is a text form of it rather than its Python repr.

    Numbers are; so is any value whose type (or a base other than `object`)
    defines ``__str__`` (a date, a UUID, a Decimal, an Enum). Containers (dict,
    list, tuple, set) and classes without ``__str__`` fall back to their repr.
    """
    if isinstance(value, (int, float)):
        return True
    return any("__str__" in vars(c) for c in type(value).__mro__[:-1])


class StrSerde:
    """UTF-8 text; bytes unchanged; numbers and values with their own ``__str__``
    written with `str()` (so ints become decimal text).

    Any other value (a dict, list, tuple, set, an object without ``__str__``)
    has no text form: `str()` would write its Python repr, which no reader can
    parse back. It is a `RecordError` (the job's error policy: by default a dead
    letter) naming the serde that can write it.
    """

    name = "str"

    def dumps(self, value: Any) -> bytes | None:
        if type(value) is str:  # the common case first: this runs once per output
            return value.encode()
        if value is None:
            return None
        if isinstance(value, bytes):
            return value
        if _has_text_form(value):
            return str(value).encode()
        kind = type(value).__name__
        if isinstance(value, (dict, list, tuple)):
            advice = (
                'give the sink value_serde="json" (key_serde="json" for a key), '
                "or turn it into text in the job"
            )
        else:
            advice = (
                'turn it into text in the job, or into a JSON value with value_serde="json" '
                '(key_serde="json" for a key)'
            )
        raise RecordError(
            f"the str serde cannot write a value of type {kind} as text (str() would give "
            f"its Python repr): {advice}"
        )

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise DecodeError(f"not UTF-8: {exc}") from None


class JsonSerde:
    """JSON text (UTF-8)."""

    name = "json"

    def dumps(self, value: Any) -> bytes | None:
        """Compact JSON; a value JSON cannot hold is a `RecordError` naming why.

        NaN and infinities are refused too: `json.dumps` would write ``NaN``, which
        is not JSON and which other readers of the topic reject.
        """
        try:
            return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise RecordError(f"cannot encode {type(value).__name__} as JSON: {exc}") from None

    def loads(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DecodeError(f"not JSON: {exc}") from None


class PickleSerde:
    """Python pickles: loading one runs code it names, so only for topics nobody else writes.

    kstream itself no longer uses it (channels and state have safe encodings,
    `kstream.protocol.codec`); it stays for jobs that choose it knowingly.
    """

    name = "pickle"

    def dumps(self, value: Any) -> bytes | None:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes | None) -> Any:
        return None if data is None else pickle.loads(data)


BYTES = BytesSerde()
STR = StrSerde()
JSON = JsonSerde()
PICKLE = PickleSerde()
_BY_NAME: dict[str, Serde] = {s.name: s for s in (BYTES, STR, JSON, PICKLE)}


def serde(spec: str | Serde) -> Serde:
    """A serde by name (`bytes`, `str`, `json`, `pickle`) or the serde itself."""
    if isinstance(spec, str):
        try:
            return _BY_NAME[spec]
        except KeyError:
            raise ConfigurationError(
                f"unknown serde {spec!r}; choose one of {', '.join(_BY_NAME)}"
            ) from None
    return spec
