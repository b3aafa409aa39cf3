"""How keyed state values are encoded in RocksDB: pluggable, and by default never running code.

A job chooses one with ``Job(..., state_serde=...)``: a name from `STATE_SERDES`
or a `StateSerde` instance. Snapshots record its `name`; a restore with another
one is refused (`kstream.runtime.task`), since bytes written by one serde mean
nothing, or something wrong, to another.

================ ==============================================================
name             what it stores
================ ==============================================================
``msgpack``      the default: None, bool, int (any size), float, str, bytes,
                 lists, dicts, and tuples, sets and frozensets kept as such
                 (msgpack extension types); loading runs no code
``json``         JSON values only (tuples come back as lists, dict keys must be
                 str); loading runs no code; readable by other tools
``trusted-pickle`` any picklable value; loading runs code named by the stored
                 bytes, so only for state the job's owner trusts (a local state
                 directory nobody else writes). Checkpoints written before
                 serdes were recorded hold pickled state: only this serde
                 restores them
================ ==============================================================
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from kstream.errors import ConfigurationError

__all__ = ["JSON", "MSGPACK", "STATE_SERDES", "TRUSTED_PICKLE", "StateSerde", "state_serde"]

#: msgpack extension type codes; stored in snapshots, so never renumbered.
_EXT_TUPLE, _EXT_SET, _EXT_FROZENSET, _EXT_BIGINT = 1, 2, 3, 4


@dataclass(frozen=True, slots=True)
class StateSerde:
    """Turns state values into bytes and back.

    `dumps` raises `TypeError` or `ValueError` for a value it cannot encode;
    ``loads(dumps(v)) == v`` for every value it accepts (with its own type
    rules, e.g. JSON's lists for tuples). `dumps` must be deterministic for
    equal values, since map entry keys are stored under their encoding.
    """

    #: Recorded in snapshots; a restore with another name is refused.
    name: str
    dumps: Callable[[Any], bytes]
    loads: Callable[[bytes], Any]


def _ext_default(obj: Any) -> msgpack.ExtType:
    if isinstance(obj, tuple):
        return msgpack.ExtType(_EXT_TUPLE, _mp_dumps(list(obj)))
    if isinstance(obj, (set, frozenset)):
        code = _EXT_SET if isinstance(obj, set) else _EXT_FROZENSET
        items = list(obj)
        try:
            # Sets iterate in hash order, salted per process for str: sort so
            # that equal sets encode equally (map entry keys depend on it).
            items.sort()
        except TypeError:
            items.sort(key=_mp_dumps)
        return msgpack.ExtType(code, _mp_dumps(items))
    if type(obj) is int:
        # Beyond 64 bits msgpack has no integer type.
        return msgpack.ExtType(_EXT_BIGINT, str(obj).encode())
    raise TypeError(f"msgpack state serde cannot store {type(obj).__name__} values")


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_TUPLE:
        return tuple(_mp_loads(data))
    if code == _EXT_SET:
        return set(_mp_loads(data))
    if code == _EXT_FROZENSET:
        return frozenset(_mp_loads(data))
    if code == _EXT_BIGINT:
        return int(data)
    raise ValueError(f"unknown msgpack extension type {code} in state")


class _MsgpackEncoder:
    """`msgpack.packb` without building a `Packer` per call (that is most of its cost).

    A packer is not reentrant (`_ext_default` encodes a tuple's items while the
    outer value is being packed) nor thread-safe, so each call takes one from a
    pool (list pop and append are atomic) and makes one if the pool is empty.
    """

    def __init__(self) -> None:
        self._free: list[msgpack.Packer] = []

    def __call__(self, value: Any) -> bytes:
        free = self._free
        # strict_types: tuples and int/str subclasses go through `_ext_default`
        # instead of silently becoming lists and plain ints.
        packer = (
            free.pop()
            if free
            else msgpack.Packer(default=_ext_default, use_bin_type=True, strict_types=True)
        )
        try:
            out: bytes = packer.pack(value)  # resets its buffer on errors too
        finally:
            free.append(packer)
        return out


_mp_dumps = _MsgpackEncoder()


def _mp_loads(raw: bytes) -> Any:
    return msgpack.unpackb(raw, ext_hook=_ext_hook, raw=False, strict_map_key=False)


def _json_dumps(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _json_loads(raw: bytes) -> Any:
    return json.loads(raw)


def _pickle_dumps(value: Any) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


MSGPACK = StateSerde("msgpack", _mp_dumps, _mp_loads)
JSON = StateSerde("json", _json_dumps, _json_loads)
TRUSTED_PICKLE = StateSerde("trusted-pickle", _pickle_dumps, pickle.loads)
#: The serdes a job can name.
STATE_SERDES = {s.name: s for s in (MSGPACK, JSON, TRUSTED_PICKLE)}


def state_serde(choice: str | StateSerde) -> StateSerde:
    """The serde `choice` names (or is); `ConfigurationError` for an unknown name."""
    if isinstance(choice, StateSerde):
        return choice
    serde = STATE_SERDES.get(choice)
    if serde is None:
        raise ConfigurationError(
            f"unknown state serde {choice!r}: choose one of {', '.join(STATE_SERDES)}"
            " or pass a kstream.StateSerde"
        )
    return serde
