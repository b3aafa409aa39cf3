"""`kstream.tools.state.bootstrap.fill`: rows written through the runtime's state
classes read back by `decode.rows` and by the runtime's own map and list states."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rocksdict import AccessType, Options, Rdict

from kstream.dataflow.state.serde import MSGPACK
from kstream.protocol.key_groups import group_of
from kstream.runtime.state.store import StateStore, key_bytes, state_options
from kstream.runtime.state.timers import EVENT
from kstream.tools.state.bootstrap import Written, clear, fill
from kstream.tools.state.decode import StateKind, rows

K = 128
OP = "s1.op"
STATES = (
    Written(),
    Written(StateKind.MAP, "seen"),
    Written(StateKind.LIST, "history", json_values=True),
)


def _row(key: Any, i: int, entry: Any, value: Any, at: int = 0) -> Any:
    kb = key_bytes(key)
    return (group_of(kb, K), kb, i, at), (entry, value)


def _rows() -> list[Any]:
    """Three keys' rows, grouped by key and sorted as `write_state` sorts them."""
    out = []
    for key in ["a", 7, "b\x00c"]:
        out.append(_row(key, 0, None, {"n": 1}))
        out += [_row(key, 1, e, [e, 2]) for e in ("x", 5)]
        out += [_row(key, 2, None, json.dumps([str(key), j]), j) for j in range(3)]
    return sorted(out, key=lambda r: r[0])


def test_filled_rows_read_back_by_kind_and_by_the_runtime(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db", MSGPACK, K)
    assert fill(store, OP, STATES, _rows()) == 3
    store.flush()
    # The runtime's own states see the entries: the list's length, the map's entries.
    ctx = store.context(OP)
    kb = key_bytes(7)
    ctx.key = group_of(kb, K).to_bytes(2, "big") + kb
    assert ctx.get() == {"n": 1}
    assert dict(ctx.map("seen").items()) == {"x": ["x", 2], 5: [5, 2]}
    assert len(ctx.list("history")) == 3
    assert list(ctx.list("history")) == [["7", 0], ["7", 1], ["7", 2]]
    ctx.list("history").append("next")  # appends after the bootstrapped elements
    assert list(ctx.list("history"))[-1] == "next"
    store.flush()
    store.close()

    db = Rdict(str(tmp_path / "db"), Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        maps = list(rows(db, OP, StateKind.MAP, "seen", MSGPACK.loads, K))
        lists = list(rows(db, OP, StateKind.LIST, "history", MSGPACK.loads, K))
        values = list(rows(db, OP, StateKind.VALUE, None, MSGPACK.loads, K))
    finally:
        db.close()
    assert {(k, e): v for _, k, e, v in maps} == {
        (k, e): [e, 2] for k in ("a", 7, "b\x00c") for e in ("x", 5)
    }
    assert {(k, i): v for _, k, i, v in lists} == {
        (k, j): [str(k), j] for k in ("a", 7, "b\x00c") for j in range(3)
    } | {(7, 3): "next"}
    assert {k: v for _, k, v in values} == {k: {"n": 1} for k in ("a", 7, "b\x00c")}


def test_clear_removes_the_named_states_alone_and_a_refill_replaces_them(
    tmp_path: Path,
) -> None:
    store = StateStore(tmp_path / "db", MSGPACK, K)
    fill(store, OP, STATES, _rows())
    # Beside them: a named value state of the operator, its timers and another
    # operator (whose uid starts like this one's) of the same stage.
    fill(store, OP, (Written(StateKind.VALUE, "longest"),), [_row("a", 0, None, 9)])
    fill(store, "s1.op2", (Written(),), [_row("a", 0, None, "other")])
    timers = store.timers(OP)
    kb = key_bytes("a")
    timers.register(EVENT, 1_000, group_of(kb, K).to_bytes(2, "big") + kb, "a")
    store.flush()
    store.close()

    db = Rdict(str(tmp_path / "db"), state_options())
    try:
        clear(db, OP, (Written(), Written(StateKind.LIST, "history")), K)
    finally:
        db.close()
    store = StateStore(tmp_path / "db", MSGPACK, K)
    # A refilled list starts at index 0: its length went with its elements.
    fill(store, OP, (Written(StateKind.LIST, "history"),), [_row("a", 0, None, "new", 0)])
    store.flush()
    store.close()

    db = Rdict(str(tmp_path / "db"), Options(raw_mode=True), access_type=AccessType.read_only())
    try:

        def read(op: str, kind: StateKind, name: str | None) -> list[Any]:
            return [r[1:] for r in rows(db, op, kind, name, MSGPACK.loads, K)]

        assert read(OP, StateKind.VALUE, None) == []
        assert sorted(read(OP, StateKind.LIST, "history")) == [("a", 0, "new")]
        assert len(read(OP, StateKind.MAP, "seen")) == 6  # kept
        assert read(OP, StateKind.VALUE, "longest") == [("a", 9)]
        assert read("s1.op2", StateKind.VALUE, None) == [("a", "other")]
        assert read(OP, StateKind.TIMER, None) == [("a", "event", 1_000)]
    finally:
        db.close()
