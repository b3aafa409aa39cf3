"""`checkpoint.held`: unaligned snapshots held until their channel state is recorded."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kstream.errors import CheckpointError
from kstream.runtime.checkpoint.finish import finish
from kstream.runtime.checkpoint.held import HeldSnapshots
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage
from kstream.runtime.checkpoint.take import Taken, take_snapshot
from kstream.runtime.state.store import StateStore
from tests.unit.runtime.checkpoint.parts import put, subject


@pytest.fixture
def executor() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as pool:
        yield pool


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "db")
    put(s, "k", 1)
    yield s
    s.close()


def taken(tmp_path: Path, executor: ThreadPoolExecutor, store: StateStore, n: int) -> Taken:
    return take_snapshot(
        subject(tmp_path, executor, store, []),
        n,
        channel_offsets={"c": {0: 5, 1: 7}},
        cut_on="timeout",
    )


def test_a_held_snapshot_is_stored_on_completion_with_its_channel_state(
    tmp_path: Path, executor: ThreadPoolExecutor, store: StateStore
) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    held = HeldSnapshots(executor)
    held.hold(taken(tmp_path, executor, store, 3))
    assert 3 in held
    assert len(held) == 1
    complete = held.complete(3, {"c": {0: 5, 1: 6}}, {"c": {1: [[9, 2]]}}, 12.5)
    assert 3 not in held
    assert len(held) == 0
    assert complete.cut_on == "timeout"
    meta = finish(storage, executor, complete, unaligned=True).future.result(timeout=30)
    stored = storage.load(3, "s1-0")
    assert stored == meta
    assert stored.channel_offsets == {"c": {0: 5, 1: 6}}
    assert stored.channel_replay == {"c": {1: [[9, 2]]}}
    assert stored.alignment_ms == 12.5
    assert stored.has_state
    assert storage.validate(3, ["s1-0"]) == []


def test_a_held_snapshot_dropped_on_abandon_is_never_stored_and_its_staged_state_goes(
    tmp_path: Path, executor: ThreadPoolExecutor, store: StateStore
) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    held = HeldSnapshots(executor)
    snapshot = taken(tmp_path, executor, store, 3)
    held.hold(snapshot)
    held.hold(taken(tmp_path, executor, store, 4))
    held.drop(3)
    assert 3 not in held
    assert 4 in held
    # The removal runs on the executor after the state's checkpoint: wait for both.
    executor.submit(lambda: None).result(timeout=30)
    assert snapshot.staged is not None
    assert not snapshot.staged.exists()
    with pytest.raises(KeyError):
        held.complete(3, {}, {}, 0.0)
    with pytest.raises(CheckpointError):
        storage.load(3, "s1-0")
    held.drop(3)  # again, or never held: nothing to do
    held.drop(99)
    assert 4 in held
