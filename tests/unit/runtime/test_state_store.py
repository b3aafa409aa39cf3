"""`kstream.runtime.state.store`: keyed values in RocksDB, flushes, checkpoints and key bytes."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocksdict import Checkpoint, Rdict

from kstream.errors import UnsupportedTypeError
from kstream.runtime.state import keyed as state_module
from kstream.runtime.state import store as state_store_module
from kstream.runtime.state.store import (
    KEY_FORMAT,
    LEGACY_KEY_FORMAT,
    StateStore,
    key_bytes,
    key_encoder,
    legacy_key_bytes,
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "tasks" / "s1-0" / "db")
    yield s
    s.close()


def reopened(s: StateStore) -> StateStore:
    s.close()
    return StateStore(s.path)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Where a test opens (and reopens) its own store."""
    return tmp_path / "db"


# -- get / set / clear --------------------------------------------------------------


def test_a_key_without_a_value_gives_the_default(store: StateStore) -> None:
    st = store.value_state("count")
    st.key = b"k"
    assert st.get() is None
    assert st.get(0) == 0


def test_set_then_get_and_clear(store: StateStore) -> None:
    st = store.value_state("count")
    st.key = b"k"
    st.set({"n": 1})
    assert st.get() == {"n": 1}
    st.clear()
    assert st.get("gone") == "gone"


def test_each_key_has_its_own_value(store: StateStore) -> None:
    st = store.value_state("count")
    for k, v in [(b"a", 1), (b"b", 2)]:
        st.key = k
        st.set(v)
    st.key = b"a"
    assert st.get() == 1
    st.key = b"b"
    assert st.get() == 2


def test_operators_do_not_share_state(db: Path) -> None:
    store = StateStore(db)
    one, two = store.value_state("s1.one"), store.value_state("s1.two")
    assert store.value_state("s1.one") is one
    one.key = two.key = b"k"
    one.set("mine")
    assert two.get() is None
    store.flush()
    s = reopened(store)
    one, two = s.value_state("s1.one"), s.value_state("s1.two")
    one.key = two.key = b"k"
    assert (one.get(), two.get()) == ("mine", None)
    s.close()


# -- flush -------------------------------------------------------------------------------


def test_flush_writes_each_changed_key_once(store: StateStore) -> None:
    st = store.value_state("count")
    st.key = b"a"
    st.set(1)
    st.set(2)
    st.key = b"b"
    st.set(3)
    assert store.flush() == 2
    assert store.flush() == 0  # nothing changed since


def test_flushed_values_are_in_the_database_and_unflushed_ones_are_not(tmp_path: Path) -> None:
    s = StateStore(tmp_path / "db")
    st = s.value_state("count")
    st.key = b"kept"
    st.set(1)
    st.key = b"removed"
    st.set(2)
    s.flush()
    st.clear()
    st.key = b"cached"
    st.set(3)  # never flushed: the write-back cache only
    s.close()
    s = StateStore(tmp_path / "db")
    st = s.value_state("count")
    values = {}
    for k in (b"kept", b"removed", b"cached"):
        st.key = k
        values[k] = st.get("absent")
    s.close()
    assert values == {b"kept": 1, b"removed": 2, b"cached": "absent"}


def test_a_cleared_key_is_deleted_by_the_flush(db: Path) -> None:
    store = StateStore(db)
    st = store.value_state("count")
    st.key = b"k"
    st.set(1)
    store.flush()
    st.clear()
    assert store.flush() == 1
    s = reopened(store)
    st = s.value_state("count")
    st.key = b"k"
    assert st.get("absent") == "absent"
    s.close()


def test_values_survive_the_read_cache_being_dropped(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_module, "CACHE_LIMIT", 3)
    st = store.value_state("count")
    for i in range(10):
        st.key = str(i).encode()
        st.set(i * i)
    store.flush()
    got = []
    for i in range(10):
        st.key = str(i).encode()
        got.append(st.get())
    assert got == [i * i for i in range(10)]


# -- checkpoints ------------------------------------------------------------------


def test_a_checkpoint_holds_the_values_at_that_moment(store: StateStore, tmp_path: Path) -> None:
    st = store.value_state("count")
    st.key = b"k"
    st.set("before")  # not flushed: the checkpoint flushes first
    size = store.checkpoint(tmp_path / "staging" / "chk-1")
    assert size > 0
    assert size == sum(f.stat().st_size for f in (tmp_path / "staging" / "chk-1").rglob("*"))
    st.set("after")
    store.flush()

    restored_path = tmp_path / "restored" / "db"
    StateStore.restore(tmp_path / "staging" / "chk-1", restored_path)
    restored = StateStore(restored_path)
    rst = restored.value_state("count")
    rst.key = b"k"
    assert rst.get() == "before"
    restored.close()
    assert st.get() == "after"  # the live database went on


def test_a_restore_replaces_what_was_there(store: StateStore, tmp_path: Path) -> None:
    st = store.value_state("count")
    st.key = b"old"
    st.set(1)
    store.checkpoint(tmp_path / "chk")
    target = tmp_path / "other" / "db"
    other = StateStore(target)
    ost = other.value_state("count")
    ost.key = b"stray"
    ost.set(2)
    other.flush()
    other.close()
    StateStore.restore(tmp_path / "chk", target)
    again = StateStore(target)
    ast = again.value_state("count")
    ast.key = b"stray"
    assert ast.get() is None
    ast.key = b"old"
    assert ast.get() == 1
    again.close()


def test_a_checkpoint_target_must_not_exist(store: StateStore, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    # RocksDB refuses (a bare Exception): an old staging copy is never overwritten in place.
    with pytest.raises(Exception, match="Directory exists"):
        store.checkpoint(tmp_path / "taken")


def test_wipe_removes_the_database_and_tolerates_its_absence(tmp_path: Path) -> None:
    s = StateStore(tmp_path / "db")
    s.close()
    StateStore.wipe(tmp_path / "db")
    assert not (tmp_path / "db").exists()
    StateStore.wipe(tmp_path / "db")


# -- key bytes ----------------------------------------------------------------------


@pytest.mark.parametrize(("key", "expected"), [("wörd", "wörd".encode()), (b"\x00raw", b"\x00raw")])
def test_str_and_bytes_keys_keep_their_bytes(key: object, expected: bytes) -> None:
    # These bytes route keys to channels and name them in RocksDB snapshots: a
    # change would re-route keys and orphan the state of existing checkpoints.
    assert key_bytes(key) == expected
    assert legacy_key_bytes(key) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (42, b"\xff\x2a"),
        (-7, b"\xff\xf9"),
        (None, b"\xff\xc0"),
        (True, b"\xff\xc3"),
        (1.5, b"\xff\xcb\x3f\xf8" + bytes(6)),
        (("a", 1), b"\xff\xd6\x01\x92\xa1a\x01"),
    ],
)
def test_other_keys_are_0xff_and_their_canonical_encoding(key: object, expected: bytes) -> None:
    # Pinned: key format 2 is recorded in snapshots and must not drift.
    assert key_bytes(key) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [(42, b"42"), (-7, b"-7"), (10**30, str(10**30).encode()), (("a", 1), None), (None, None)],
)
def test_legacy_key_format_keeps_its_bytes(key: object, expected: bytes | None) -> None:
    # Jobs resumed from checkpoints of key format 1 keep routing and reading with it.
    assert key_encoder(LEGACY_KEY_FORMAT) is legacy_key_bytes
    assert key_encoder(KEY_FORMAT) is key_bytes
    assert legacy_key_bytes(key) == (expected or pickle.dumps(key, protocol=4))


def test_an_int_key_and_its_decimal_text_are_two_keys() -> None:
    assert key_bytes(1) != key_bytes("1")
    assert key_bytes(10**30) != key_bytes(str(10**30))
    assert legacy_key_bytes(1) == legacy_key_bytes("1")  # why format 2 exists


#: Keys as jobs build them: scalars, and tuples/frozensets of them, nested.
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
_keys = st.recursive(
    _scalars,
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=4),
    max_leaves=8,
)


def _same(a: object, b: object) -> bool:
    """Equal with the same types throughout (1 and True, or 1 and 1.0, are not the same key)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        assert isinstance(b, tuple)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, frozenset):
        assert isinstance(b, frozenset)
        return len(a) == len(b) and all(any(_same(x, y) for y in b) for x in a)
    if isinstance(a, float):
        # 0.0 and -0.0 are equal in Python but two keys here (docs/internals/channels.md,
        # "Channel wire format, keys, and what kstream trusts").
        return repr(a) == repr(b)
    return bool(a == b)


@given(_keys, _keys)
def test_distinct_keys_have_distinct_bytes(a: object, b: object) -> None:
    assert (key_bytes(a) == key_bytes(b)) == _same(a, b) or (
        # str and bytes share bytes by design (format 1 did too).
        {type(a), type(b)} == {str, bytes} and key_bytes(a) == key_bytes(b)
    )


@given(st.frozensets(st.text(max_size=4) | st.integers(), max_size=8), st.randoms())
def test_equal_sets_have_equal_key_bytes(items: frozenset[object], rnd: Any) -> None:
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert key_bytes(frozenset(shuffled)) == key_bytes(items)


def test_a_key_of_an_unsupported_type_is_a_record_error_naming_it() -> None:
    class Point:
        pass

    with pytest.raises(UnsupportedTypeError, match=r"a key of type tuple holds a .*Point"):
        key_bytes(("a", Point()))


def test_a_bool_key_is_neither_the_int_nor_the_text_it_resembles() -> None:
    assert key_bytes(True) not in (key_bytes(1), key_bytes("True"))
    assert key_bytes(False) not in (key_bytes(0), key_bytes("False"))


KEYS = ["word", b"bytes", 42, -1, True, None, ("a", 1), 2.5, frozenset({"x", "y", "z", "w"})]


def test_key_bytes_are_the_same_in_another_process() -> None:
    # Workers route keys to channels by these bytes: a per-process salt (like
    # Python's `hash`) would send one key to two subtasks.
    here = [key_bytes(k) for k in KEYS]
    code = (
        "import sys, pickle\n"
        "from kstream.runtime.state.store import key_bytes\n"
        f"keys = {KEYS!r}\n"
        "sys.stdout.buffer.write(pickle.dumps([key_bytes(k) for k in keys]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        timeout=120,
    )
    assert pickle.loads(done.stdout) == here


class HeldExecutor(Executor):
    """Runs what is submitted only when told to: a checkpoint still being created."""

    def __init__(self) -> None:
        self.queue: list[tuple[Future[Any], Callable[[], Any]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.queue.append((future, lambda: fn(*args, **kwargs)))
        return future

    def run(self) -> None:
        while self.queue:
            future, call = self.queue.pop(0)
            future.set_result(call())


def restored_value(checkpoint: Path, tmp_path: Path, key: bytes) -> Any:
    path = tmp_path / "restored" / checkpoint.name / "db"
    StateStore.restore(checkpoint, path)
    restored = StateStore(path)
    st = restored.value_state("count")
    st.key = key
    try:
        return st.get()
    finally:
        restored.close()


def test_a_checkpoint_made_later_holds_the_state_of_its_call_not_of_its_creation(
    store: StateStore, tmp_path: Path
) -> None:
    st = store.value_state("count")
    st.key = b"k"
    st.set("at the barrier")
    executor = HeldExecutor()
    created = store.checkpoint_later(tmp_path / "staging" / "chk-1", executor)
    st.set("after the barrier")
    st.key = b"new"
    st.set("after the barrier")
    assert store.flush() == 0  # deferred: the database must not change yet
    assert st.get() == "after the barrier"  # reads find the deferred writes in the cache
    st.key = b"k"
    assert st.get() == "after the barrier"

    executor.run()
    assert created.result() > 0
    chk = tmp_path / "staging" / "chk-1"
    assert restored_value(chk, tmp_path, b"k") == "at the barrier"
    assert restored_value(chk, tmp_path, b"new") is None
    assert store.flush() == 2  # once created, the deferred writes go in
    store.checkpoint(tmp_path / "staging" / "chk-2")
    assert restored_value(tmp_path / "staging" / "chk-2", tmp_path, b"new") == "after the barrier"


def test_a_second_checkpoint_waits_for_the_first_and_holds_what_was_deferred(
    store: StateStore, tmp_path: Path
) -> None:
    st = store.value_state("count")
    st.key = b"k"
    st.set(1)
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = store.checkpoint_later(tmp_path / "chk-1", pool)
        st.set(2)
        store.flush()
        second = store.checkpoint_later(tmp_path / "chk-2", pool)
        st.set(3)
        assert first.result() > 0
        assert second.result() > 0
    assert restored_value(tmp_path / "chk-1", tmp_path, b"k") == 1
    assert restored_value(tmp_path / "chk-2", tmp_path, b"k") == 2


class ObservedCheckpoint:
    """rocksdict's `Checkpoint`, noting how many entries the memtables held when called."""

    unflushed: ClassVar[list[int]] = []

    def __init__(self, db: Rdict) -> None:
        self._db = db
        self._checkpoint = Checkpoint(db)

    def create_checkpoint(self, path: str) -> None:
        self.unflushed.append(
            sum(
                self._db.property_int_value(p) or 0
                for p in (
                    "rocksdb.num-entries-active-mem-table",
                    "rocksdb.num-entries-imm-mem-tables",
                )
            )
        )
        self._checkpoint.create_checkpoint(path)


@pytest.fixture
def observed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    unflushed: ClassVar[list[int]] = []
    monkeypatch.setattr(ObservedCheckpoint, "unflushed", unflushed)
    monkeypatch.setattr(state_store_module, "Checkpoint", ObservedCheckpoint)
    return unflushed


def test_the_memtable_is_flushed_before_the_checkpoint_call_that_holds_the_gil(
    store: StateStore, tmp_path: Path, observed: list[int]
) -> None:
    # rocksdict holds the GIL for all of create_checkpoint: a memtable it had to
    # flush itself would stop the worker's processing thread for the flush.
    st = store.value_state("count")
    for i in range(1000):
        st.key = b"k%d" % i
        st.set(i)
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert store.checkpoint_later(tmp_path / "chk-1", pool).result() > 0
    assert observed == [0]
    assert restored_value(tmp_path / "chk-1", tmp_path, b"k999") == 999


def test_a_background_flush_not_done_in_time_leaves_the_flush_to_the_checkpoint(
    store: StateStore, tmp_path: Path, observed: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A property that stays non-zero: the background flush never looks done.
    monkeypatch.setattr(state_store_module, "_FLUSH_PROPERTIES", ("rocksdb.estimate-num-keys",))
    monkeypatch.setattr(state_store_module, "MEMTABLE_FLUSH_WAIT_S", 0.05)
    st = store.value_state("count")
    st.key = b"k"
    st.set("at the barrier")
    executor = HeldExecutor()
    created = store.checkpoint_later(tmp_path / "chk-1", executor)
    st.set("after the barrier")
    executor.run()
    assert created.result() > 0
    assert len(observed) == 1
    assert restored_value(tmp_path / "chk-1", tmp_path, b"k") == "at the barrier"
