"""`kstream.runtime.checkpoint.restore`: a subtask's snapshot read back, on real files."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kstream.dataflow.outputs import SinkSnapshot, SinkWriter
from kstream.dataflow.state.serde import JSON, MSGPACK
from kstream.errors import CheckpointError
from kstream.protocol.barrier import Channel, Replay
from kstream.runtime.checkpoint.finish import finish
from kstream.runtime.checkpoint.restore import Restored, restore
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, SnapshotMeta
from kstream.runtime.checkpoint.take import take_snapshot
from kstream.runtime.state.store import KEY_FORMAT, StateStore
from tests.unit.runtime.checkpoint.parts import RecordingWriter, get, put, subject

TASK = "s1-0"


@pytest.fixture
def storage(tmp_path: Path) -> LocalCheckpointStorage:
    return LocalCheckpointStorage(tmp_path / "checkpoints")


def stored(tmp_path: Path, storage: LocalCheckpointStorage, n: int) -> SnapshotMeta:
    """Checkpoint `n` of `TASK` as a subtask stores it: key "k" = 1, one sink's part."""
    store = StateStore(tmp_path / "live")
    put(store, "k", 1)
    sinks: dict[str, SinkWriter] = {"out#0": RecordingWriter("out#0", [], payload=[b"w"])}
    with ThreadPoolExecutor(1) as executor:
        taken = take_snapshot(subject(tmp_path, executor, store, [], sinks), n)
        meta = finish(storage, executor, taken).future.result(timeout=30)
    store.close()
    return meta


@contextlib.contextmanager
def restored(
    storage: LocalCheckpointStorage, n: int | None, db: Path, **kw: object
) -> Iterator[Restored]:
    """`restore` of `TASK`, its state closed after."""
    r = restore(storage, n, TASK, state_db=db, state_serde=MSGPACK, **kw)  # type: ignore[arg-type]
    try:
        yield r
    finally:
        if r.state is not None:
            r.state.close()


def test_from_scratch_the_state_is_empty_and_nothing_is_kept(
    tmp_path: Path, storage: LocalCheckpointStorage
) -> None:
    db = tmp_path / "task" / "db"
    old = StateStore(db)
    put(old, "k", 9)
    old.flush()
    old.close()
    with restored(storage, None, db) as r:
        assert r.state is not None
        assert get(r.state, "k") is None
        assert (r.checkpoint, r.meta, r.epoch, r.key_format) == (None, None, 1, KEY_FORMAT)
        assert r.kept("out#0") is None
        assert r.replay({}) == {}


def test_a_snapshot_gives_back_its_state_meta_and_sinks_parts(
    tmp_path: Path, storage: LocalCheckpointStorage
) -> None:
    meta = stored(tmp_path, storage, 4)
    with restored(storage, 4, tmp_path / "task" / "db") as r:
        assert r.meta == meta
        assert r.state is not None
        assert get(r.state, "k") == 1
        assert r.epoch == 5
        assert r.kept("out#0") == SinkSnapshot({"epoch": 4, "sink": "out#0"}, [b"w"])
        # A sink the snapshot knows nothing of starts empty, not from scratch.
        assert r.kept("other#1") == SinkSnapshot({}, None)


def test_a_stage_without_state_opens_none(tmp_path: Path, storage: LocalCheckpointStorage) -> None:
    stored(tmp_path, storage, 4)
    r = restore(storage, 4, TASK, state_db=None, state_serde=MSGPACK)
    assert r.state is None
    assert r.meta is not None


def test_a_replay_of_a_channel_that_is_not_an_input_is_refused(
    tmp_path: Path, storage: LocalCheckpointStorage
) -> None:
    meta = SnapshotMeta(2, 1, TASK, channel_replay={"c": {0: [[9, 1]], 3: [[4, 1]]}})
    storage.store(meta, None)
    db = tmp_path / "task" / "db"
    with pytest.raises(CheckpointError, match=r"checkpoint 2 of s1-0 replays c\[3\], which is not"):
        restore(storage, 2, TASK, state_db=db, state_serde=MSGPACK, inputs={("c", 0), ("c", 1)})
    assert not db.exists()  # refused before any state is placed
    inputs = {("c", 0), ("c", 3)}
    with restored(storage, 2, db, inputs=inputs) as r:
        channels = {tp: Channel(*tp) for tp in inputs}
        assert r.replay(channels) == {
            Channel("c", 0): (Replay(9, 1),),
            Channel("c", 3): (Replay(4, 1),),
        }


def test_a_lost_state_database_is_refused(tmp_path: Path, storage: LocalCheckpointStorage) -> None:
    stored(tmp_path, storage, 4)
    shutil.rmtree(tmp_path / "checkpoints" / "chk-4" / TASK / "db")
    with pytest.raises(CheckpointError, match="checkpoint 4 lost the state database of s1-0"):
        restore(storage, 4, TASK, state_db=tmp_path / "task" / "db", state_serde=MSGPACK)


def test_a_damaged_state_database_is_refused_naming_the_checkpoint(
    tmp_path: Path, storage: LocalCheckpointStorage
) -> None:
    stored(tmp_path, storage, 4)
    (tmp_path / "checkpoints" / "chk-4" / TASK / "db" / "CURRENT").write_text("MANIFEST-999999\n")
    with pytest.raises(CheckpointError, match="s1-0 cannot be restored from checkpoint 4"):
        restore(storage, 4, TASK, state_db=tmp_path / "task" / "db", state_serde=MSGPACK)


def test_state_written_with_another_serde_is_refused(
    tmp_path: Path, storage: LocalCheckpointStorage
) -> None:
    stored(tmp_path, storage, 4)
    with pytest.raises(CheckpointError, match="msgpack"):
        restore(storage, 4, TASK, state_db=tmp_path / "task" / "db", state_serde=JSON)
