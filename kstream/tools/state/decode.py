"""Rows of one operator's state, decoded from one subtask's RocksDB database.

The layout read here is the runtime's (`kstream.runtime.state.keyed`,
`kstream.runtime.state.timers`); ``<g>`` is a key group's two big-endian
bytes (key format 3; absent in format 2)::

    <g><op>\\0<key>                      value: the operator's default value state
    <g><op>.<name>\\0<key>               value: a named value (reducing, aggregating) state
    <g><op>.<name>\\0<len><key><entry>   map / list entry (a list's length under b"")
    <g><op>.timers\\0<d><ts><key>         timer: domain byte, timestamp; value = the key

RocksDB keys alone do not say whether ``<op>.<name>`` is a value, a map or a
list state: the reader names the kind, as Flink's State Processor API has its
reader name a state descriptor. A window operator's windows are its map state
``windows``: ``(start, end) -> (contents, emitted)``.

Every function here is pure over an open `Rdict` (raw mode), so it is tested
against databases the runtime's own `StateStore` wrote.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterator
from typing import Any

from rocksdict import Rdict

from kstream.dataflow.state.timers import decode_timer_key
from kstream.errors import ConfigurationError
from kstream.protocol.codec import Codec
from kstream.runtime.state.element import TIMERS_STATE

__all__ = ["StateKind", "decode_key", "rows", "to_json_text"]

_KEY_CODEC = Codec(canonical=True)
#: First byte of a key that is neither str nor bytes (`kstream.runtime.state.store.key_bytes`).
_TYPED = 0xFF
#: A window operator's map state (`kstream.dataflow.operators.window`).
WINDOWS_STATE = "windows"


class StateKind(enum.Enum):
    """What kind of state to read; each has its own row shape (`rows`)."""

    VALUE = "value"
    MAP = "map"
    LIST = "list"
    TIMER = "timer"
    WINDOW = "window"


def decode_key(raw: bytes) -> Any:
    """The key object whose canonical bytes are `raw` (inverse of ``key_bytes``).

    A str key and the bytes of its UTF-8 are one key in kstream: such bytes
    come back as the str. Bytes that are not UTF-8 come back as bytes.
    """
    if raw[:1] == bytes([_TYPED]):
        return _KEY_CODEC.loads(raw[1:])
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"{type(value).__name__} is not JSON")


def to_json_text(value: Any) -> str:
    """`value` as JSON text: tuples as lists, sets as sorted lists, bytes as hex."""
    return json.dumps(value, default=_plain, sort_keys=True, separators=(",", ":"))


def _scan(db: Rdict, prefix: bytes, max_parallelism: int) -> Iterator[tuple[int, bytes, bytes]]:
    """(key group, key after `prefix`, value) of every entry under `prefix`.

    Grouped (key format 3): one seek per key group holding anything; past a
    group's entries the iterator stands on the next group with keys, which is
    where to look next. Ungrouped (`max_parallelism` 0): one seek, group -1.
    """
    it = db.iter()
    if not max_parallelism:
        it.seek(prefix)
        while it.valid():
            k = it.key()
            if not k.startswith(prefix):
                break
            yield -1, k[len(prefix) :], it.value()
            it.next()
        return
    g = 0
    while g < max_parallelism:
        start = g.to_bytes(2, "big") + prefix
        it.seek(start)
        while it.valid():
            k = it.key()
            if not k.startswith(start):
                break
            yield g, k[len(start) :], it.value()
            it.next()
        if not it.valid():
            return
        g = max(g + 1, int.from_bytes(it.key()[:2], "big"))


def _split_entry(rest: bytes) -> tuple[bytes, bytes]:
    n = int.from_bytes(rest[:4], "big")
    return rest[4 : 4 + n], rest[4 + n :]


def rows(
    db: Rdict,
    op: str,
    kind: StateKind,
    name: str | None,
    loads: Callable[[bytes], Any],
    max_parallelism: int,
) -> Iterator[tuple[Any, ...]]:
    """Decoded rows of state `name` (None: the default value state) of operator `op`
    (``s<stage>.<uid>``), by kind (each row starts with the key group and the key):

    ========= ===================================================
    value     (key_group, key, value)
    map       (key_group, key, entry, value)
    list      (key_group, key, index, value), in list order
    timer     (key_group, key, domain, timestamp)
    window    (key_group, key, start, end, value, emitted)
    ========= ===================================================

    `loads`: the state serde's; `ConfigurationError` for a name/kind pair that
    cannot be (a default state that is not a value; window with another name).
    """
    if kind is StateKind.TIMER:
        prefix = f"{op}.{TIMERS_STATE}".encode() + b"\x00"
        for g, rest, raw in _scan(db, prefix, max_parallelism):
            domain, timer = decode_timer_key(rest)
            yield g, loads(raw), domain.name.lower(), timer.timestamp
        return
    if name is None and kind is StateKind.WINDOW:
        name = WINDOWS_STATE
    if name is None:
        if kind is not StateKind.VALUE:
            raise ConfigurationError(f"the default state of {op} is a value state: name a state")
        prefix = op.encode() + b"\x00"
    else:
        prefix = f"{op}.{name}".encode() + b"\x00"
    scan = _scan(db, prefix, max_parallelism)
    if kind is StateKind.VALUE:
        for g, key, raw in scan:
            yield g, decode_key(key), loads(raw)
    elif kind is StateKind.MAP:
        for g, rest, raw in scan:
            key, entry = _split_entry(rest)
            yield g, decode_key(key), loads(entry), loads(raw)
    elif kind is StateKind.LIST:
        for g, rest, raw in scan:
            key, entry = _split_entry(rest)
            if entry:  # b"" holds the list's length
                yield g, decode_key(key), int.from_bytes(entry, "big"), loads(raw)
    else:
        for g, rest, raw in scan:
            key, entry = _split_entry(rest)
            start, end = loads(entry)
            contents, emitted = loads(raw)
            yield g, decode_key(key), int(start), int(end), contents, bool(emitted)
