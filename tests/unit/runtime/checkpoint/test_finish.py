"""`kstream.runtime.checkpoint.finish`: the durable copy, off the processing thread."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kstream.dataflow.outputs import SinkWriter
from kstream.errors import CheckpointError
from kstream.runtime.checkpoint.finish import finish
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage
from kstream.runtime.checkpoint.take import take_snapshot
from kstream.runtime.state.store import StateStore
from tests.unit.runtime.checkpoint.parts import RecordingWriter, put, subject


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as pool:
        yield pool


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "db")
    yield s
    s.close()


def test_the_copy_is_stored_after_the_sinks_finish_with_the_states_size(
    tmp_path: Path, executor: ThreadPoolExecutor, store: StateStore
) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    seen: list[bool] = []
    # A sink's finishing work runs before the copy: the snapshot is not stored yet.
    stored = tmp_path / "checkpoints" / "chk-4" / "s1-0" / "meta.json"
    sinks: dict[str, SinkWriter] = {
        "out#0": RecordingWriter("out#0", [], [b"a"], finish=lambda: seen.append(stored.exists()))
    }
    put(store, "k", 1)
    taken = take_snapshot(subject(tmp_path, executor, store, [], sinks), 4, cut_on="started")
    pending = finish(storage, executor, taken, unaligned=True, in_flight=3)
    assert (pending.task, pending.unaligned, pending.in_flight, pending.cut_on) == (
        "s1-0",
        True,
        3,
        "started",
    )
    meta = pending.future.result(timeout=30)
    assert seen == [False]
    assert taken.state is not None
    assert meta.size == taken.state.result() > 0
    assert storage.load(4, "s1-0") == meta
    assert storage.load_payload(4, "s1-0", "out#0") == [b"a"]
    assert storage.validate(4, ["s1-0"]) == []
    # The staged copy is the storage's now: it is gone from the staging directory.
    assert taken.staged is not None
    assert not taken.staged.exists()


def test_a_storage_failure_declines_the_checkpoint_and_processing_goes_on(
    tmp_path: Path, executor: ThreadPoolExecutor, store: StateStore
) -> None:
    root = tmp_path / "checkpoints"
    storage = LocalCheckpointStorage(root)
    # Where checkpoint 1 would go, a file: the storage cannot write it (as on a full disk).
    (root / "chk-1").write_text("in the way")
    put(store, "k", 1)
    taken = take_snapshot(subject(tmp_path, executor, store, []), 1)
    pending = finish(storage, executor, taken)  # returns: the failure is not the caller's
    error = pending.future.exception(timeout=30)
    # The future's failure is what the worker declines the checkpoint with.
    assert isinstance(error, CheckpointError)
    assert str(root / "chk-1") in str(error)
    assert taken.staged is not None
    assert not taken.staged.exists()
    # Processing goes on from the state in memory, and the next checkpoint is stored.
    put(store, "k", 2)
    store.flush()
    again = finish(storage, executor, take_snapshot(subject(tmp_path, executor, store, []), 2))
    assert again.future.result(timeout=30).checkpoint == 2
    assert storage.validate(2, ["s1-0"]) == []


def test_a_sinks_failed_finishing_work_fails_the_snapshot_and_stores_nothing(
    tmp_path: Path, executor: ThreadPoolExecutor
) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")

    def unacknowledged() -> None:
        raise CheckpointError("the sealed transaction's records were not acknowledged")

    sinks: dict[str, SinkWriter] = {"out#0": RecordingWriter("out#0", [], finish=unacknowledged)}
    taken = take_snapshot(subject(tmp_path, executor, None, [], sinks), 1)
    error = finish(storage, executor, taken).future.exception(timeout=30)
    assert isinstance(error, CheckpointError)
    assert "not acknowledged" in str(error)
    with pytest.raises(CheckpointError):
        storage.load(1, "s1-0")
