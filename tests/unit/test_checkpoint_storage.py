"""`LocalCheckpointStorage`: snapshots and sinks' write-ahead payloads on a local disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from kstream.errors import CheckpointError
from kstream.snapshot import LocalCheckpointStorage, SnapshotMeta

ROWS = [(b"word", b"1", None), (None, b"2", [("kstream.src.topic", b"in")])]


def test_meta_and_payloads_round_trip(tmp_path: Path) -> None:
    storage = LocalCheckpointStorage(tmp_path)
    meta = SnapshotMeta(7, 2, "s1-0", source_offsets={"in": {0: 5}}, sink={"kafka:out#0": {}})
    storage.store(meta, None, {"kafka:out#0": {6: ROWS, 7: []}, "kafka:other#1": None})
    assert storage.load(7, "s1-0") == meta
    assert storage.load_payload(7, "s1-0", "kafka:out#0") == {6: ROWS, 7: []}
    assert storage.load_payload(7, "s1-0", "kafka:other#1") is None


def test_a_damaged_payload_is_a_checkpoint_error_not_garbage(tmp_path: Path) -> None:
    storage = LocalCheckpointStorage(tmp_path)
    storage.store(SnapshotMeta(3, 1, "s0-0"), None, {"kafka:out#0": {3: ROWS}})
    (wal,) = (tmp_path / "chk-3" / "s0-0").glob("sink-*.wal")
    wal.write_bytes(wal.read_bytes()[:20])  # torn write
    with pytest.raises(CheckpointError, match="unreadable"):
        storage.load_payload(3, "s0-0", "kafka:out#0")
    wal.write_bytes(b"\x80\x05pickle")
    with pytest.raises(CheckpointError, match="not a write-ahead file"):
        storage.load_payload(3, "s0-0", "kafka:out#0")
