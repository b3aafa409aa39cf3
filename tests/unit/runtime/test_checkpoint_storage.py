"""`LocalCheckpointStorage`: snapshots and sinks' write-ahead payloads on a local disk."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from kstream.errors import CheckpointError
from kstream.runtime.checkpoint.storage import (
    SNAPSHOT_VERSION,
    LocalCheckpointStorage,
    SnapshotMeta,
    storage_failure,
)
from kstream.runtime.state.store import KEY_FORMAT, LEGACY_KEY_FORMAT, UNGROUPED_KEY_FORMAT

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


# -- manifests and validation -------------------------------------------------


def stored_with_db(tmp_path: Path, checkpoint: int = 5) -> LocalCheckpointStorage:
    """A checkpoint of two subtasks, one with a (fake) database directory."""
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    staged = tmp_path / f"staged-{checkpoint}"
    staged.mkdir()
    (staged / "000012.sst").write_bytes(b"sst" * 1000)
    (staged / "CURRENT").write_text("MANIFEST-000005\n")
    storage.store(SnapshotMeta(checkpoint, 1, "s1-0", identity="abc"), staged)
    storage.store(SnapshotMeta(checkpoint, 1, "s0-0", identity="abc"), None, {"k#0": {5: ROWS}})
    return storage


def test_an_intact_checkpoint_validates(tmp_path: Path) -> None:
    storage = stored_with_db(tmp_path)
    assert storage.validate(5, ["s0-0", "s1-0"], "abc") == []
    assert storage.validate(5, ["s0-0", "s1-0"]) == []


def test_every_kind_of_damage_is_named(tmp_path: Path) -> None:
    storage = stored_with_db(tmp_path)
    chk = storage.root / "chk-5"
    tasks = ["s0-0", "s1-0"]
    assert storage.validate(5, tasks, "other") == [
        f"{chk / t} was taken by another job (identity abc)" for t in tasks
    ]
    assert storage.validate(5, [*tasks, "s2-0"]) == [
        f"{chk / 's2-0' / 'manifest.json'} is missing (snapshot incomplete or not of this kstream)"
    ]
    sst = chk / "s1-0" / "db" / "000012.sst"
    sst.write_bytes(b"sst" * 999 + b"xyz")  # same size, other bytes
    assert storage.validate(5, tasks) == [f"{sst} does not match its checksum"]
    sst.write_bytes(b"short")
    assert storage.validate(5, tasks) == [f"{sst} has 5 bytes, the manifest says 3000"]
    sst.unlink()
    assert storage.validate(5, tasks) == [f"{sst} is missing"]
    meta = chk / "s0-0" / "meta.json"
    meta.write_text(meta.read_text().replace('"checkpoint": 5', '"checkpoint": 6'))
    assert storage.validate(5, ["s0-0"]) == [f"{meta} does not match its checksum"]
    (chk / "s0-0" / "manifest.json").write_text("{not json")
    assert storage.validate(5, ["s0-0"])[0].startswith(
        f"{chk / 's0-0' / 'manifest.json'} is unreadable"
    )
    storage.discard(5)
    assert storage.validate(5, tasks) == [f"{chk} is missing"]


def test_an_unreadable_meta_is_a_checkpoint_error(tmp_path: Path) -> None:
    storage = stored_with_db(tmp_path)
    (storage.root / "chk-5" / "s0-0" / "meta.json").write_text('{"checkpoint": 5,')
    with pytest.raises(CheckpointError, match="unreadable"):
        storage.load(5, "s0-0")


def test_a_stored_database_shares_no_file_with_the_staged_one(tmp_path: Path) -> None:
    """Damage to the live database (linked with the staged copy) must not reach a checkpoint."""
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    staged = tmp_path / "staged"
    staged.mkdir()
    live = tmp_path / "live.sst"
    live.write_bytes(b"a" * 100)
    (staged / "1.sst").hardlink_to(live)
    storage.store(SnapshotMeta(1, 1, "s1-0"), staged)
    live.write_bytes(b"b" * 100)  # damaged in place
    assert (storage.root / "chk-1" / "s1-0" / "db" / "1.sst").read_bytes() == b"a" * 100
    assert storage.validate(1, ["s1-0"]) == []


# -- failures and sweeping ------------------------------------------------------


def test_a_failed_store_leaves_neither_a_partial_snapshot_nor_the_staged_copy(
    tmp_path: Path,
) -> None:
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    staged = tmp_path / "staged"
    staged.mkdir()
    (staged / "000012.sst").write_bytes(b"sst")
    # A payload marshal cannot write fails the store after the database was copied.
    with pytest.raises(ValueError, match="unmarshallable"):
        storage.store(SnapshotMeta(4, 1, "s1-0"), staged, {"k#0": {4: [object()]}})
    assert not (storage.root / "chk-4" / "s1-0").exists()
    assert not staged.exists()
    assert storage.validate(4, ["s1-0"]) != []


def test_a_failed_write_is_one_line_naming_the_cause_and_a_file(tmp_path: Path) -> None:
    # What `shutil.copytree` raises: the repr of this list would be its text.
    copied = shutil.Error(
        [
            ("/s/000012.sst", "/c/chk-4/s1-0/db/000012.sst", "[Errno 28] No space left on device"),
            ("/s/CURRENT", "/c/chk-4/s1-0/db/CURRENT", "[Errno 28] No space left on device"),
        ]
    )
    assert storage_failure(copied, tmp_path) == (
        "No space left on device: /c/chk-4/s1-0/db/000012.sst (and 1 more files)"
    )
    named = OSError(errno.EROFS, os.strerror(errno.EROFS), "/c/chk-4")
    assert storage_failure(named, tmp_path) == "Read-only file system: /c/chk-4"
    # A failed write or fsync names no file: the snapshot's directory is named.
    unnamed = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert storage_failure(unnamed, tmp_path) == f"No space left on device: {tmp_path}"


def test_a_store_that_cannot_write_is_a_checkpoint_error_of_one_line(tmp_path: Path) -> None:
    (tmp_path / "chk-4").write_text("a file where the checkpoint's directory would go")
    storage = LocalCheckpointStorage(tmp_path)
    with pytest.raises(CheckpointError) as failed:
        storage.store(SnapshotMeta(4, 1, "s1-0"), None)
    assert str(failed.value) == f"Not a directory: {tmp_path / 'chk-4' / 's1-0'}"


def test_sweep_deletes_what_is_older_than_the_newest_retained_and_not_retained(
    tmp_path: Path,
) -> None:
    storage = LocalCheckpointStorage(tmp_path)
    for n in (2, 3, 5, 6, 8, 9):
        storage.store(SnapshotMeta(n, 1, "s0-0"), None)
    assert storage.sweep([5, 8]) == [2, 3, 6]
    # Newer than every retained one: a checkpoint still in progress, kept.
    assert storage.completed() == [5, 8, 9]
    assert storage.sweep([]) == []
    assert storage.completed() == [5, 8, 9]


def test_a_sweep_below_a_bound_keeps_what_is_above_it(tmp_path: Path) -> None:
    # Concurrent snapshots: 6 may still complete after 8 did; sweep below the
    # oldest retained completion only.
    storage = LocalCheckpointStorage(tmp_path)
    for n in (2, 3, 5, 6, 8):
        storage.store(SnapshotMeta(n, 1, "s0-0"), None)
    assert storage.sweep([5, 8], below=5) == [2, 3]
    assert storage.completed() == [5, 6, 8]


# -- metadata format versions -------------------------------------------------------


def _stored_meta(tmp_path: Path, **fields: object) -> tuple[LocalCheckpointStorage, Path]:
    """A stored snapshot of checkpoint 3 whose meta.json is then replaced by `fields`."""
    storage = LocalCheckpointStorage(tmp_path)
    storage.store(SnapshotMeta(3, 1, "s1-0"), None)
    path = tmp_path / "chk-3" / "s1-0" / "meta.json"
    path.write_text(json.dumps(fields))
    return storage, path


def test_new_snapshots_record_their_version_and_key_format(tmp_path: Path) -> None:
    storage = LocalCheckpointStorage(tmp_path)
    storage.store(SnapshotMeta(3, 1, "s1-0"), None)
    raw = json.loads((tmp_path / "chk-3" / "s1-0" / "meta.json").read_text())
    assert raw["version"] == SNAPSHOT_VERSION == 4
    assert raw["key_format"] == UNGROUPED_KEY_FORMAT == 2  # unless the subtask says otherwise
    assert storage.load(3, "s1-0") == SnapshotMeta(3, 1, "s1-0")
    grouped = SnapshotMeta(4, 1, "s1-0", key_format=KEY_FORMAT, max_parallelism=128, parallelism=3)
    storage.store(grouped, None)
    assert storage.load(4, "s1-0") == grouped
    assert KEY_FORMAT == 3


def test_a_snapshot_of_version_3_reads_without_key_groups(tmp_path: Path) -> None:
    storage, _ = _stored_meta(
        tmp_path, checkpoint=3, generation=1, task="s1-0", version=3, key_format=2
    )
    meta = storage.load(3, "s1-0")
    assert (meta.key_format, meta.max_parallelism, meta.parallelism) == (2, 0, 0)


def test_a_snapshot_from_before_versions_reads_as_version_1_with_key_format_1(
    tmp_path: Path,
) -> None:
    # What kstream wrote before: no version, no key format.
    storage, _ = _stored_meta(
        tmp_path,
        checkpoint=3,
        generation=1,
        task="s1-0",
        source_offsets={"in": {"0": 7}},
        has_state=True,
        state_serde="msgpack",
    )
    meta = storage.load(3, "s1-0")
    assert (meta.version, meta.key_format) == (1, LEGACY_KEY_FORMAT)
    assert meta.source_offsets == {"in": {0: 7}}


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"version": 5}, "format version 5 is not one this kstream reads"),
        ({"version": "2"}, "format version '2' is not one"),
        ({"key_format": 9}, "key format 9"),
        ({"checkpoint": None}, "checkpoint is None, not int"),
        ({"checkpoint": True}, "checkpoint is True, not int"),
        ({"task": 5}, "task is 5, not str"),
        ({"has_state": "yes"}, "has_state is 'yes', not bool"),
        ({"source_offsets": {"in": {"x": 1}}}, "source_offsets is not offsets"),
        ({"channel_offsets": {"t": {"0": "1"}}}, "channel_offsets is not offsets"),
        ({"channel_offsets": []}, "channel_offsets is not offsets"),
        ({"code": "__import__('os')"}, "unknown field 'code'"),
        ({"channel_replay": {"t": {"0": [[5]]}}}, "channel_replay is not replay windows"),
        ({"channel_replay": {"t": {"0": [["5", 1]]}}}, "channel_replay is not replay windows"),
        ({"channel_replay": {"t": [1]}}, "channel_replay is not replay windows"),
    ],
)
def test_a_meta_of_a_newer_version_or_with_a_mistyped_field_is_refused_naming_the_file(
    tmp_path: Path, fields: dict[str, object], why: str
) -> None:
    good: dict[str, object] = {"checkpoint": 3, "generation": 1, "task": "s1-0", "version": 2}
    storage, path = _stored_meta(tmp_path, **{**good, **fields})
    with pytest.raises(CheckpointError, match=re.escape(str(path)) + ".*" + re.escape(why)):
        storage.load(3, "s1-0")


@pytest.mark.parametrize("text", ["[]", "7", "{", '{"checkpoint": 3, "task": "s1-0"}'])
def test_a_meta_that_is_not_an_object_or_lacks_fields_is_refused(tmp_path: Path, text: str) -> None:
    storage, path = _stored_meta(tmp_path)
    path.write_text(text)
    with pytest.raises(CheckpointError, match=re.escape(str(path)) + " is unreadable"):
        storage.load(3, "s1-0")


def test_validate_reports_a_newer_meta_so_recovery_falls_back(tmp_path: Path) -> None:
    storage = LocalCheckpointStorage(tmp_path, checksums=False)
    storage.store(SnapshotMeta(3, 1, "s1-0"), None)
    path = tmp_path / "chk-3" / "s1-0" / "meta.json"
    text = path.read_text().replace('"version": 4', '"version": 5')
    path.write_text(text)  # same size: the manifest (without checksums) still matches
    [problem] = storage.validate(3, ["s1-0"])
    assert str(path) in problem
    assert "format version 5" in problem


def test_recorded_channel_state_round_trips_and_version_2_reads_as_none(tmp_path: Path) -> None:
    storage = LocalCheckpointStorage(tmp_path)
    meta = SnapshotMeta(
        3,
        2,
        "s1-0",
        channel_offsets={"kstream.j.s1": {0: 4, 1: 9}},
        channel_replay={"kstream.j.s1": {0: [[7, 1], [12, 2]]}},
    )
    storage.store(meta, None)
    assert storage.load(3, "s1-0") == meta
    # Written before unaligned checkpoints: no windows, nothing to replay.
    storage, _ = _stored_meta(
        tmp_path / "v2", checkpoint=3, generation=1, task="s1-0", version=2, key_format=2
    )
    assert storage.load(3, "s1-0").channel_replay == {}


# -- restores -------------------------------------------------------------------


def stored_rocksdb(tmp_path: Path, keys: int = 2_000) -> LocalCheckpointStorage:
    """Checkpoint 1 of subtask s1-0, holding a real RocksDB database of `keys` keys."""
    from rocksdict import Checkpoint, Rdict

    live = Rdict(str(tmp_path / "live"))
    for i in range(keys):
        live[f"k{i}"] = f"v{i}"
    live.flush()
    Checkpoint(live).create_checkpoint(str(tmp_path / "staged"))
    live.close()
    storage = LocalCheckpointStorage(tmp_path / "checkpoints")
    storage.store(SnapshotMeta(1, 1, "s1-0"), tmp_path / "staged")
    return storage


def test_a_restore_links_table_files_and_copies_the_files_rocksdb_writes(tmp_path: Path) -> None:
    storage = stored_rocksdb(tmp_path)
    stored = storage.root / "chk-1" / "s1-0" / "db"
    target = tmp_path / "restored"
    assert storage.fetch_db(1, "s1-0", target)
    tables = sorted(p.name for p in stored.glob("*.sst"))
    assert tables, "the checkpoint holds table files"
    for name in tables:
        assert (target / name).samefile(stored / name)
    others = [p.name for p in stored.iterdir() if p.suffix != ".sst"]
    assert "CURRENT" in others
    assert any(n.startswith("MANIFEST") for n in others)
    for name in others:
        assert not (target / name).samefile(stored / name), name
        assert (target / name).read_bytes() == (stored / name).read_bytes()


def test_writing_to_a_restored_database_leaves_its_checkpoint_intact(tmp_path: Path) -> None:
    """RocksDB never rewrites a table file: the linked checkpoint keeps validating and
    restores the state it was taken with, however the restored database changes."""
    from rocksdict import Rdict

    storage = stored_rocksdb(tmp_path)
    target = tmp_path / "restored"
    storage.fetch_db(1, "s1-0", target)
    db = Rdict(str(target))
    assert db["k7"] == "v7"
    for rewrite in range(3):
        for i in range(2_000):
            db[f"k{i}"] = f"changed {rewrite}"
        db.flush()
    del db["k7"]
    db.compact_range(None, None)  # replaces every table file the restore linked
    db.close()
    assert storage.validate(1, ["s1-0"]) == []
    again = tmp_path / "again"
    storage.fetch_db(1, "s1-0", again)
    db = Rdict(str(again))
    assert (db["k7"], db["k1999"]) == ("v7", "v1999")
    db.close()
