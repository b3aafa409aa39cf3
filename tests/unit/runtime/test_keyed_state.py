"""`kstream.runtime.state.keyed`: every kind of keyed state against a real RocksDB.

The hypothesis model test drives a store and a plain-dict model with the same
random operations, flushes, cache drops and reopenings, and compares every read.
"""

from __future__ import annotations

import contextlib
import copy
import operator
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rocksdict import DbClosedError

from kstream.dataflow.state.serde import JSON, MSGPACK
from kstream.errors import ConfigurationError, StateValueError
from kstream.runtime.state import keyed as keyed_state
from kstream.runtime.state.keyed import KeyedStateContext
from kstream.runtime.state.store import StateStore, key_bytes

OP = "s1.process"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "db")
    yield s
    # Tests that reopen the database have closed this one already.
    with contextlib.suppress(DbClosedError):
        s.close()


def at(ctx: KeyedStateContext, key: Any) -> KeyedStateContext:
    ctx.key = key_bytes(key)
    return ctx


def reopen(store: StateStore) -> StateStore:
    store.flush()
    store.close()
    return StateStore(store.path, store.serde)


def test_value_state_is_per_key_and_named_apart_from_the_default(store: StateStore) -> None:
    ctx = store.context(OP)
    at(ctx, "a").set(1)
    ctx.value("total").set((1, 2))
    at(ctx, "b").value("total").set({3})
    assert at(ctx, "a").get() == 1
    assert ctx.value("total").get() == (1, 2)
    assert at(ctx, "b").get() is None
    assert ctx.value("total").get() == {3}
    ctx.value("total").clear()
    assert ctx.value("total").get("none") == "none"
    store = reopen(store)
    ctx = store.context(OP)
    assert at(ctx, "a").get() == 1
    assert ctx.value("total").get() == (1, 2)
    assert at(ctx, "b").value("total").get() is None
    store.close()


def test_map_state_entries_survive_flush_and_reopen(store: StateStore) -> None:
    ctx = at(store.context(OP), "k")
    m = ctx.map("m")
    m.put("x", 1)
    m.put(("t", 2), [1, 2])
    store.flush()
    m.put("y", 2)
    m.remove("x")
    assert not m.contains("x")
    assert m.contains("y")
    assert m.get("x", 0) == 0
    assert dict(m.items()) == {("t", 2): [1, 2], "y": 2}
    store = reopen(store)
    m = at(store.context(OP), "k").map("m")
    assert dict(m.items()) == {("t", 2): [1, 2], "y": 2}
    assert sorted(m.values(), key=repr) == [2, [1, 2]]
    assert set(m.keys()) == {("t", 2), "y"}
    store.close()


def test_equal_entries_of_other_types_stay_apart_through_the_entry_memo(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (1, 2) == (1.0, 2) == (True, 2), but they are three entries: the memo of
    # encodings must not hand one's encoding to another (nor forget any, at its limit).
    monkeypatch.setattr(keyed_state, "ENTRY_MEMO_LIMIT", 2)
    entries = [(1, 2), (1.0, 2), (True, 2), "s", b"s", (3, 4), 1]
    ctx = at(store.context(OP), "k")
    for _ in range(2):  # the second round finds the encodings remembered
        for i, e in enumerate(entries):
            ctx.map("m").put(e, i)
        assert [ctx.map("m").get(e) for e in entries] == list(range(len(entries)))
    stored = list(ctx.map("m").items())
    assert len(stored) == len(entries)
    assert {(repr(e), v) for e, v in stored} == {(repr(e), i) for i, e in enumerate(entries)}
    ctx.map("m").remove((1.0, 2))
    store = reopen(store)
    m = at(store.context(OP), "k").map("m")
    assert {repr(e) for e, _ in m.items()} == {repr(e) for e in entries if repr(e) != "(1.0, 2)"}
    assert m.get((1, 2)) == 0
    assert m.get((True, 2)) == 2
    assert not m.contains((1.0, 2))
    store.close()


def test_map_clear_deletes_flushed_entries_of_that_key_only(store: StateStore) -> None:
    ctx = store.context(OP)
    at(ctx, "a").map("m").put(1, "a1")
    at(ctx, "b").map("m").put(1, "b1")
    store.flush()
    at(ctx, "a").map("m").clear()
    assert list(ctx.map("m").items()) == []
    ctx.map("m").put(2, "a2")
    store = reopen(store)
    ctx = store.context(OP)
    assert dict(at(ctx, "a").map("m").items()) == {2: "a2"}
    assert dict(at(ctx, "b").map("m").items()) == {1: "b1"}
    store.close()


def test_keys_with_nul_bytes_do_not_see_each_others_entries(store: StateStore) -> None:
    # Without the key's length in the RocksDB key, b"a"'s entries would be a
    # prefix of b"a\0..."'s and a scan of one would return the other's.
    ctx = store.context(OP)
    at(ctx, b"a").map("m").put("e", 1)
    at(ctx, b"a\x00\xa1e").map("m").put("f", 2)
    store.flush()
    assert dict(at(ctx, b"a").map("m").items()) == {"e": 1}
    at(ctx, b"a").map("m").clear()
    store.flush()
    assert dict(at(ctx, b"a\x00\xa1e").map("m").items()) == {"f": 2}


def test_list_state_appends_in_order_across_flushes(store: StateStore) -> None:
    ctx = at(store.context(OP), 7)
    lst = ctx.list("l")
    lst.append("a")
    store.flush()
    lst.extend(["b", ("c",)])
    assert list(lst) == ["a", "b", ("c",)]
    assert len(lst) == 3
    store = reopen(store)
    lst = at(store.context(OP), 7).list("l")
    assert list(lst) == ["a", "b", ("c",)]
    lst.clear()
    assert list(lst) == []
    assert len(lst) == 0
    lst.append("d")
    store = reopen(store)
    assert list(at(store.context(OP), 7).list("l")) == ["d"]
    store.close()


def test_list_iteration_over_ten_elements_keeps_append_order(store: StateStore) -> None:
    # Element indices are big-endian, so 10 sorts after 9 (a decimal index would not).
    lst = at(store.context(OP), "k").list("l")
    lst.extend(range(12))
    store.flush()
    assert list(lst) == list(range(12))


def test_reducing_and_aggregating_state(store: StateStore) -> None:
    ctx = at(store.context(OP), "k")
    r = ctx.reducing("max", max)
    assert r.get() is None
    for v in [3, 9, 4]:
        r.add(v)
    agg = ctx.aggregating("seen", lambda acc, v: acc | {v}, frozenset())
    assert agg.get() == frozenset()
    agg.add("x")
    agg.add("y")
    store = reopen(store)
    ctx = at(store.context(OP), "k")
    assert ctx.reducing("max", max).get() == 9
    assert ctx.aggregating("seen", operator.or_, frozenset()).get() == {"x", "y"}
    ctx.reducing("max", max).clear()
    ctx.aggregating("seen", operator.or_, frozenset()).clear()
    assert ctx.reducing("max", max).get(-1) == -1
    assert ctx.aggregating("seen", operator.or_, frozenset()).get() == frozenset()
    store.close()


def test_aggregating_hands_add_a_copy_of_initial(store: StateStore) -> None:
    ctx = store.context(OP)

    def add(acc: list[int], v: int) -> list[int]:
        acc.append(v)
        return acc

    initial: list[int] = []
    at(ctx, "a").aggregating("l", add, initial).add(1)
    at(ctx, "b").aggregating("l", add, initial).add(2)
    assert initial == []
    assert ctx.aggregating("l", add, initial).get() == [2]


def test_a_name_is_bound_to_one_kind_of_state(store: StateStore) -> None:
    ctx = store.context(OP)
    ctx.map("x")
    with pytest.raises(ConfigurationError, match=r"'x' of s1\.process is a map state"):
        ctx.list("x")
    with pytest.raises(ConfigurationError, match="non-empty"):
        ctx.value("")


def test_an_unencodable_value_fails_the_flush_naming_state_key_and_remedy(
    store: StateStore,
) -> None:
    ctx = at(store.context(OP), "k")
    ctx.set(object())
    with pytest.raises(StateValueError) as caught:
        store.flush()
    line = str(caught.value)
    assert "state s1.process of key b'k' holds a object value" in line
    assert "state_serde" in line
    ctx.set(1)
    store.flush()  # nothing else is wrong
    ctx.map("m").put("e", {1, object()})
    with pytest.raises(StateValueError, match=r"state s1\.process\.m of key b'k' holds a set"):
        store.flush()


def test_named_state_is_in_the_checkpoint(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "live" / "db", JSON)
    ctx = at(store.context(OP), "k")
    ctx.map("m").put("a", [1])
    ctx.list("l").append({"b": 2})
    store.checkpoint(tmp_path / "chk")
    ctx.map("m").put("later", 0)
    ctx.list("l").clear()
    store.flush()
    store.close()
    StateStore.restore(tmp_path / "chk", tmp_path / "restored")
    restored = StateStore(tmp_path / "restored", JSON)
    ctx = at(restored.context(OP), "k")
    assert dict(ctx.map("m").items()) == {"a": [1]}
    assert list(ctx.list("l")) == [{"b": 2}]
    restored.close()


def test_changes_wait_in_the_cache_until_enough_gather(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyed_state, "FLUSH_AT", 3)
    ctx = store.context(OP)
    for key in ["a", "b", "a", "a"]:
        at(ctx, key).set(key * 2)
        at(ctx, key).map("m").put(key, 1)
    # Two changed keys in each state: below the bound, nothing is written...
    assert store.flush_due() == 0
    assert at(ctx, "b").get() == "bb"
    at(ctx, "c").set("cc")
    # ...a third in the value state: everything is, the map's two keys too.
    assert store.flush_due() == 3 + 2
    assert store.flush_due() == 0
    # A map flush visits the keys changed since the last one only.
    at(ctx, "a").map("m").remove("a")
    assert store.flush() == 1
    assert dict(at(ctx, "a").map("m").items()) == {}
    assert dict(at(ctx, "b").map("m").items()) == {"b": 1}


def test_a_checkpoint_holds_changes_not_yet_due(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "db")
    at(store.context(OP), "k").set(7)
    assert store.flush_due() == 0
    store.checkpoint(tmp_path / "chk")
    store.close()
    StateStore.restore(tmp_path / "chk", tmp_path / "restored")
    restored = StateStore(tmp_path / "restored")
    assert at(restored.context(OP), "k").get() == 7
    restored.close()


# -- the model test -----------------------------------------------------------

KEYS = st.sampled_from(["a", "b", b"a\x00", 3])
ENTRIES = st.sampled_from(["x", "y", ("t", 1), 5, frozenset({"p", "q"})])
VALUES = st.one_of(st.integers(), st.text(max_size=3), st.tuples(st.integers()))

OPS = st.one_of(
    st.tuples(st.just("set"), KEYS, VALUES),
    st.tuples(st.just("clear"), KEYS),
    st.tuples(st.just("put"), KEYS, ENTRIES, VALUES),
    st.tuples(st.just("remove"), KEYS, ENTRIES),
    st.tuples(st.just("clear_map"), KEYS),
    st.tuples(st.just("append"), KEYS, VALUES),
    st.tuples(st.just("clear_list"), KEYS),
    st.tuples(st.just("reduce"), KEYS, st.integers()),
    st.tuples(st.just("flush")),
    st.tuples(st.just("flush_due")),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("checkpoint")),
)


class Model:
    def __init__(self) -> None:
        self.value: dict[Any, Any] = {}
        self.maps: dict[Any, dict[Any, Any]] = {}
        self.lists: dict[Any, list[Any]] = {}
        self.sums: dict[Any, int] = {}


def check(ctx: KeyedStateContext, model: Model, key: Any) -> None:
    at(ctx, key)
    assert ctx.get("-") == model.value.get(key, "-")
    m = model.maps.get(key, {})
    assert dict(ctx.map("m").items()) == m
    # Iteration order is the encoded entries' order, whatever was flushed when.
    assert list(ctx.map("m").keys()) == sorted(m, key=MSGPACK.dumps)
    for e in ["x", ("t", 1), 5]:
        assert ctx.map("m").contains(e) == (e in m)
        assert ctx.map("m").get(e, "-") == m.get(e, "-")
    assert list(ctx.list("l")) == model.lists.get(key, [])
    assert len(ctx.list("l")) == len(model.lists.get(key, []))
    assert ctx.reducing("sum", operator.add).get() == model.sums.get(key)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(OPS, max_size=40),
    cache_limit=st.sampled_from([2, 200_000]),
    flush_at=st.sampled_from([1, 2, 4096]),
)
def test_the_store_behaves_as_a_dict_model(
    ops: list[tuple[Any, ...]], cache_limit: int, flush_at: int
) -> None:
    original, original_flush_at = keyed_state.CACHE_LIMIT, keyed_state.FLUSH_AT
    keyed_state.CACHE_LIMIT = cache_limit  # 2: the read cache is dropped at most flushes
    keyed_state.FLUSH_AT = flush_at  # 1: every `flush_due` with a change writes
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = StateStore(Path(tmp) / "db")
            ctx = store.context(OP)
            model = Model()
            #: The latest checkpoint's directory and the model as it was then.
            checkpointed: tuple[Path, Model] | None = None
            for i, (op, *args) in enumerate(ops):
                if op == "checkpoint":
                    target = Path(tmp) / f"chk-{i}"
                    store.checkpoint(target)
                    checkpointed = (target, copy.deepcopy(model))
                    continue
                if op == "flush":
                    store.flush()
                    continue
                if op == "flush_due":
                    store.flush_due()
                    continue
                if op == "reopen":
                    store = reopen(store)
                    ctx = store.context(OP)
                    continue
                key = args[0]
                at(ctx, key)
                if op == "set":
                    ctx.set(args[1])
                    model.value[key] = args[1]
                elif op == "clear":
                    ctx.clear()
                    model.value.pop(key, None)
                elif op == "put":
                    ctx.map("m").put(args[1], args[2])
                    model.maps.setdefault(key, {})[args[1]] = args[2]
                elif op == "remove":
                    ctx.map("m").remove(args[1])
                    model.maps.get(key, {}).pop(args[1], None)
                elif op == "clear_map":
                    ctx.map("m").clear()
                    model.maps.pop(key, None)
                elif op == "append":
                    ctx.list("l").append(args[1])
                    model.lists.setdefault(key, []).append(args[1])
                elif op == "clear_list":
                    ctx.list("l").clear()
                    model.lists.pop(key, None)
                elif op == "reduce":
                    ctx.reducing("sum", operator.add).add(args[1])
                    model.sums[key] = model.sums.get(key, 0) + args[1]
                check(ctx, model, key)
            store = reopen(store)
            ctx = store.context(OP)
            for key in ["a", "b", b"a\x00", 3]:
                check(ctx, model, key)
            store.close()
            if checkpointed is not None:
                # What a recovery does: the checkpoint copied into place, later writes gone.
                StateStore.restore(checkpointed[0], Path(tmp) / "restored")
                restored = StateStore(Path(tmp) / "restored")
                ctx = restored.context(OP)
                for key in ["a", "b", b"a\x00", 3]:
                    check(ctx, checkpointed[1], key)
                restored.close()
    finally:
        keyed_state.CACHE_LIMIT, keyed_state.FLUSH_AT = original, original_flush_at
