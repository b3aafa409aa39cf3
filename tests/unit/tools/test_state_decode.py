"""`kstream.tools.state.decode` against databases the runtime's own `StateStore` wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rocksdict import AccessType, Options, Rdict

from kstream.dataflow.state.serde import MSGPACK
from kstream.dataflow.state.timers import TimerDomain
from kstream.errors import ConfigurationError
from kstream.protocol.key_groups import group_of
from kstream.runtime.state.store import StateStore, key_bytes
from kstream.tools.state.decode import StateKind, decode_key, rows, to_json_text

K = 128
KEYS: list[Any] = ["apple", "b\x00c", 7, ("t", 1), b"\x80\x81"]


def _write(path: Path) -> None:
    store = StateStore(path, MSGPACK, K)
    ctx = store.context("s1.op")
    other = store.context("s1.opx")  # a name that starts like "s1.op": never read as it
    timers = store.timers("s1.op")
    for i, key in enumerate(KEYS):
        kb = key_bytes(key)
        ctx.key = other.key = group_of(kb, K).to_bytes(2, "big") + kb
        ctx.key_object = key
        ctx.set(i)
        other.set(-1)
        ctx.map("m").put("a", [i])
        ctx.map("m").put(("x", i), {"n": i})
        for v in range(i):
            ctx.list("l").append(f"v{v}")
        ctx.map("windows").put((1000 * i, 1000 * i + 2000), ((i, "acc"), i % 2 == 0))
        timers.register(TimerDomain.EVENT, 1000 * i + 2000, ctx.key, key)
    store.flush()
    store.close()


def _read(path: Path, kind: StateKind, name: str | None) -> list[tuple[Any, ...]]:
    db = Rdict(str(path), Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        return list(rows(db, "s1.op", kind, name, MSGPACK.loads, K))
    finally:
        db.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    _write(tmp_path / "db")
    return tmp_path / "db"


def _group(key: Any) -> int:
    return group_of(key_bytes(key), K)


def test_value_rows_are_one_per_key_with_its_group(db: Path) -> None:
    got = _read(db, StateKind.VALUE, None)
    # b"\x80\x81" is not UTF-8: it comes back as bytes. (Bytes starting with 0xFF
    # are the key of the typed value they encode: key_bytes(b"\xff\xfe") == key_bytes(-2).)
    assert sorted(got, key=repr) == sorted(
        [(_group(k), k, i) for i, k in enumerate(KEYS)], key=repr
    )


def test_map_list_window_and_timer_rows(db: Path) -> None:
    maps = _read(db, StateKind.MAP, "m")
    assert len(maps) == 2 * len(KEYS)
    assert (_group(7), 7, ("x", 2), {"n": 2}) in maps
    assert (_group("apple"), "apple", "a", [0]) in maps
    lists = _read(db, StateKind.LIST, "l")
    assert [r[2:] for r in lists if r[1] == ("t", 1)] == [(0, "v0"), (1, "v1"), (2, "v2")]
    windows = _read(db, StateKind.WINDOW, None)
    assert (_group(7), 7, 2000, 4000, (2, "acc"), True) in windows
    assert len(windows) == len(KEYS)
    timers = _read(db, StateKind.TIMER, None)
    assert sorted((r[1], r[2], r[3]) for r in timers if r[1] == "apple") == [
        ("apple", "event", 2000)
    ]
    assert len(timers) == len(KEYS)


def test_a_default_state_is_a_value_state(db: Path) -> None:
    with pytest.raises(ConfigurationError, match="is a value state"):
        _read(db, StateKind.MAP, None)


def test_key_decoding_and_json_text() -> None:
    assert decode_key(key_bytes("wörd")) == "wörd"
    assert decode_key(key_bytes((1, "a"))) == (1, "a")
    assert decode_key(b"\x80") == b"\x80"
    assert to_json_text({"b": b"\x01", "s": frozenset({2, 1}), "t": (1, 2)}) == (
        '{"b":"01","s":[1,2],"t":[1,2]}'
    )
