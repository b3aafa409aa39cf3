"""`kstream.runtime.checkpoint.take`: the synchronous part of a snapshot, on a real RocksDB."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kstream.dataflow.outputs import SinkWriter
from kstream.dataflow.state.serde import MSGPACK
from kstream.runtime.checkpoint.take import take_snapshot
from kstream.runtime.state.store import KEY_FORMAT, StateStore
from tests.unit.runtime.checkpoint.parts import RecordingWriter, get, put, subject


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as pool:
        yield pool


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "db")
    yield s
    s.close()


def test_the_staged_state_is_the_state_when_taken_not_after(
    tmp_path: Path, executor: ThreadPoolExecutor, store: StateStore
) -> None:
    put(store, "a", 1)  # cached, not flushed yet: the snapshot moves it into RocksDB
    taken = take_snapshot(subject(tmp_path, executor, store, []), 3)
    put(store, "a", 2)
    put(store, "b", 1)
    store.flush()
    assert taken.state is not None
    assert taken.staged is not None
    size = taken.state.result(timeout=30)
    assert size > 0
    assert taken.staged.parent == tmp_path / "staging"
    staged = StateStore(taken.staged, MSGPACK)
    try:
        assert (get(staged, "a"), get(staged, "b")) == (1, None)
    finally:
        staged.close()
    assert get(store, "a") == 2
    assert taken.meta.has_state
    assert taken.meta.state_serde == MSGPACK.name


def test_sinks_pre_commit_then_barriers_go_out_then_the_next_epoch_begins(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    log: list[str] = []
    sinks: dict[str, SinkWriter] = {
        "out#0": RecordingWriter("out#0", log, payload=[b"x"]),
        "out#1": RecordingWriter("out#1", log),
    }
    take_snapshot(subject(tmp_path, executor, None, log, sinks), 5)
    assert log == [
        "fault point snapshotting 5",
        "pre-commit out#0 5",
        "pre-commit out#1 5",
        "fault point pre-committed 5",
        "barrier 5",
        "begin out#0 6",
        "begin out#1 6",
    ]


def test_the_meta_holds_what_the_subtask_and_its_sinks_keep(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    done: list[str] = []
    sinks: dict[str, SinkWriter] = {
        "out#0": RecordingWriter("out#0", [], payload=[b"x"], finish=lambda: done.append("0")),
        "out#1": RecordingWriter("out#1", []),
    }
    taken = take_snapshot(
        subject(tmp_path, executor, None, [], sinks, watermarks={"source": [1, 2]}),
        5,
        source_offsets={"in": {0: 10}},
        alignment_ms=1.5,
        cut_on="injected",
    )
    meta = taken.meta
    assert (meta.checkpoint, meta.generation, meta.task) == (5, 7, "s1-0")
    assert meta.source_offsets == {"in": {0: 10}}
    assert meta.channel_offsets == {}
    assert meta.alignment_ms == 1.5
    assert meta.sync_ms >= 0
    assert meta.sink == {
        "out#0": {"epoch": 5, "sink": "out#0"},
        "out#1": {"epoch": 5, "sink": "out#1"},
    }
    assert meta.identity == "fingerprint"
    assert meta.watermarks == {"source": [1, 2]}
    assert meta.key_format == KEY_FORMAT
    assert taken.payloads == {"out#0": [b"x"], "out#1": None}
    # Only the sinks with finishing work leave some, and it is not run here.
    assert len(taken.finishers) == 1
    assert done == []
    assert taken.cut_on == "injected"


def test_a_stage_without_state_stages_nothing(tmp_path: Path, executor: ThreadPoolExecutor) -> None:
    taken = take_snapshot(subject(tmp_path, executor, None, []), 1)
    assert (taken.staged, taken.state) == (None, None)
    assert not taken.meta.has_state
    assert taken.meta.state_serde == ""
    assert not (tmp_path / "staging").exists()
