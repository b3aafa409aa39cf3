"""Checkpoints in an object store (S3Proxy): store, restore, increments, damage, sweep."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest
from object_store import Bucket
from rocksdict import Checkpoint, Options, Rdict

from kstream.errors import CheckpointError, CheckpointStorageError
from kstream.runtime.checkpoint.objects import ObjectCheckpointStorage, s3_client
from kstream.runtime.checkpoint.storage import SnapshotMeta
from kstream.runtime.checkpoint.url import parse_storage_url

pytestmark = pytest.mark.s3

JOB = "job1"
TASK = "s1-0"


def storage(bucket: Bucket, *, grace_s: float = 660.0) -> ObjectCheckpointStorage:
    return ObjectCheckpointStorage(
        parse_storage_url(bucket.url()), JOB, s3_client(), shared_grace_s=grace_s
    )


class Db:
    """A RocksDB database whose checkpoints are staged as a worker stages them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        opts = Options(raw_mode=True)
        opts.create_if_missing(True)
        self.db = Rdict(str(path / "live"), opts)
        self.staged = 0

    def write(self, start: int, count: int) -> None:
        for i in range(start, start + count):
            self.db[f"k{i:06d}".encode()] = hashlib.sha256(str(i).encode()).digest() * 4
        self.db.flush()  # one new table per batch

    def stage(self) -> Path:
        self.staged += 1
        target = self.path / f"staged-{self.staged}"
        Checkpoint(self.db).create_checkpoint(str(target))
        return target


def meta(n: int, *, has_state: bool = True) -> SnapshotMeta:
    return SnapshotMeta(checkpoint=n, generation=1, task=TASK, has_state=has_state)


def tables(bucket: Bucket) -> list[str]:
    return bucket.listing(f"chk/{JOB}/shared/")


def test_a_snapshot_round_trips_with_its_state_and_sink_payload(
    bucket: Bucket, tmp_path: Path
) -> None:
    db = Db(tmp_path)
    db.write(0, 2000)
    s = storage(bucket)
    s.store(meta(1), db.stage(), {"sink#0": [b"a", ("b", 2)], "sink#1": None})
    assert s.completed() == [1]
    assert s.validate(1, [TASK]) == []
    other = storage(bucket)  # another process: nothing cached
    assert other.load(1, TASK) == meta(1)
    assert other.load_payload(1, TASK, "sink#0") == [b"a", ("b", 2)]
    assert other.load_payload(1, TASK, "sink#1") is None
    assert other.fetch_db(1, TASK, tmp_path / "restored")
    restored = Rdict(str(tmp_path / "restored"), Options(raw_mode=True))
    assert restored[b"k001999"] == db.db[b"k001999"]
    assert sum(1 for _ in restored.items()) == 2000
    restored.close()
    # Tables are content-addressed and shared; the rest are under the checkpoint.
    assert tables(bucket)
    assert all(k.endswith(".sst") for k in tables(bucket))
    manifest = json.loads(
        bucket.client.get_object(Bucket=bucket.name, Key=f"chk/{JOB}/chk-1/{TASK}/manifest.json")[
            "Body"
        ].read()
    )
    shared = [e["shared"] for e in manifest["files"].values() if "shared" in e]
    assert sorted(f"chk/{JOB}/{k}" for k in shared) == tables(bucket)


def test_a_stateless_snapshot_has_no_database(bucket: Bucket, tmp_path: Path) -> None:
    s = storage(bucket)
    s.store(meta(3, has_state=False), None)
    assert s.load(3, TASK).checkpoint == 3
    assert not s.fetch_db(3, TASK, tmp_path / "db")


def test_a_second_checkpoint_uploads_only_new_tables_once_the_first_completed(
    bucket: Bucket, tmp_path: Path
) -> None:
    db = Db(tmp_path)
    db.write(0, 3000)
    s = storage(bucket)
    s.store(meta(1), db.stage())
    first = s.last_put_bytes
    before = set(tables(bucket))
    db.write(3000, 10)
    # Checkpoint 1 not known complete: its tables are put again (harmless, same keys).
    s.store(meta(2), db.stage())
    assert s.last_put_bytes >= first
    s.note_complete(2)
    db.write(3010, 10)
    s.store(meta(3), db.stage())
    assert s.last_put_bytes < first / 4, (s.last_put_bytes, first)
    after = set(tables(bucket))
    assert before < after  # old tables kept, new ones added
    # The incremental checkpoint restores whole.
    fresh = storage(bucket)
    assert fresh.fetch_db(3, TASK, tmp_path / "r")
    restored = Rdict(str(tmp_path / "r"), Options(raw_mode=True))
    assert sum(1 for _ in restored.items()) == 3020
    restored.close()


def test_restored_tables_are_not_uploaded_again_but_forget_drops_them(
    bucket: Bucket, tmp_path: Path
) -> None:
    db = Db(tmp_path)
    db.write(0, 3000)
    storage(bucket).store(meta(1), db.stage())
    s = storage(bucket)
    assert s.fetch_db(1, TASK, tmp_path / "restored")
    reopened = Rdict(str(tmp_path / "restored"), Options(raw_mode=True))
    reopened[b"new"] = b"x"
    reopened.flush()
    staged = tmp_path / "staged"
    Checkpoint(reopened).create_checkpoint(str(staged))
    s.store(meta(2), staged)
    small = s.last_put_bytes
    s.forget()
    staged2 = tmp_path / "staged2"
    Checkpoint(reopened).create_checkpoint(str(staged2))
    s.store(meta(3), staged2)
    reopened.close()
    assert small * 4 < s.last_put_bytes


def test_a_table_of_the_same_name_and_size_built_anew_is_uploaded(
    bucket: Bucket, tmp_path: Path
) -> None:
    # A rescaled restore builds a new database whose tables are numbered from
    # the start again: a name and a size alone must not make it a trusted table.
    db = Db(tmp_path)
    db.write(0, 2000)
    s = storage(bucket)
    s.store(meta(1), db.stage())
    restored = tmp_path / "restored"
    assert s.fetch_db(1, TASK, restored)
    table = next(p for p in sorted(restored.iterdir()) if p.suffix == ".sst")
    body = bytearray(table.read_bytes())
    body[len(body) // 2] ^= 0xFF
    staged = tmp_path / "staged"
    staged.mkdir()
    for p in restored.iterdir():
        (staged / p.name).write_bytes(bytes(body) if p == table else p.read_bytes())
    s.store(meta(2), staged)
    shared = {
        e["shared"]
        for n in (1, 2)
        for e in json.loads(
            bucket.client.get_object(
                Bucket=bucket.name, Key=f"chk/{JOB}/chk-{n}/{TASK}/manifest.json"
            )["Body"].read()
        )["files"].values()
        if "shared" in e
    }
    assert f"shared/{hashlib.sha256(bytes(body)).hexdigest()}.sst" in shared


def test_a_corrupted_shared_table_fails_the_restore(bucket: Bucket, tmp_path: Path) -> None:
    db = Db(tmp_path)
    db.write(0, 2000)
    s = storage(bucket)
    s.store(meta(1), db.stage())
    key = tables(bucket)[0]
    body = bytearray(bucket.client.get_object(Bucket=bucket.name, Key=key)["Body"].read())
    body[len(body) // 2] ^= 0xFF  # same size: only the checksum tells
    bucket.client.put_object(Bucket=bucket.name, Key=key, Body=bytes(body))
    assert s.validate(1, [TASK]) == []  # sizes agree: listing cannot tell
    with pytest.raises(CheckpointError, match="does not match its checksum"):
        storage(bucket).fetch_db(1, TASK, tmp_path / "restored")
    assert not (tmp_path / "restored").exists()
    bucket.client.delete_object(Bucket=bucket.name, Key=key)
    assert "is missing" in s.validate(1, [TASK])[0]
    with pytest.raises(CheckpointError, match="is missing"):
        storage(bucket).fetch_db(1, TASK, tmp_path / "restored")


def test_a_snapshot_without_manifest_is_never_chosen(bucket: Bucket, tmp_path: Path) -> None:
    db = Db(tmp_path)
    db.write(0, 100)
    s = storage(bucket)
    s.store(meta(1), db.stage())
    bucket.client.delete_object(Bucket=bucket.name, Key=f"chk/{JOB}/chk-1/{TASK}/manifest.json")
    problems = storage(bucket).validate(1, [TASK])
    assert problems
    assert "no complete snapshot" in problems[0]
    with pytest.raises(CheckpointError, match="no complete snapshot"):
        storage(bucket).load(1, TASK)


def test_sweep_deletes_old_checkpoints_and_only_unreferenced_old_tables(
    bucket: Bucket, tmp_path: Path
) -> None:
    db = Db(tmp_path)
    s = storage(bucket, grace_s=0.0)
    for n in range(1, 5):
        db.write(n * 1000, 1000)
        s.store(meta(n), db.stage())
        s.note_complete(n)
    db.db.compact_range(None, None)  # one table replaces the four: they are garbage
    db.write(9000, 10)
    s.store(meta(5), db.stage())
    referenced = {
        e["shared"]
        for e in json.loads(
            bucket.client.get_object(
                Bucket=bucket.name, Key=f"chk/{JOB}/chk-5/{TASK}/manifest.json"
            )["Body"].read()
        )["files"].values()
        if "shared" in e
    }
    assert s.sweep([5]) == []  # the deletes run on another thread
    s.settle()
    assert s.completed() == [5]
    assert {k.removeprefix(f"chk/{JOB}/") for k in tables(bucket)} == referenced
    assert storage(bucket).fetch_db(5, TASK, tmp_path / "r")
    # Young unreferenced tables survive: they may belong to a checkpoint in flight.
    db.write(10_000, 100)
    young = storage(bucket, grace_s=600.0)
    young.store(meta(6), db.stage())
    bucket.client.delete_object(Bucket=bucket.name, Key=f"chk/{JOB}/chk-6/{TASK}/manifest.json")
    count = len(tables(bucket))
    young.sweep([5])
    young.settle()
    assert len(tables(bucket)) == count


def test_an_unreachable_store_fails_the_probe_with_one_line(bucket: Bucket) -> None:
    url = parse_storage_url("s3://no-such-bucket-here/p")
    with pytest.raises(CheckpointStorageError, match=r"no-such-bucket-here.*unreachable") as e:
        ObjectCheckpointStorage(url, JOB, s3_client(probe=True)).probe()
    assert "\n" not in str(e.value)
    closed = s3_client("http://127.0.0.1:9", probe=True)
    with pytest.raises(CheckpointStorageError, match="unreachable"):
        ObjectCheckpointStorage(parse_storage_url(bucket.url()), JOB, closed).probe()
    storage(bucket).probe()


def test_a_store_that_stops_answering_fails_the_probe_within_its_timeouts(
    bucket: Bucket,
) -> None:
    s = ObjectCheckpointStorage(
        parse_storage_url(bucket.url()), JOB, s3_client(), probe_client=s3_client(probe=True)
    )
    bucket.store.pause()  # SIGSTOP: connections are accepted, nothing is answered
    try:
        started = time.monotonic()
        with pytest.raises(CheckpointStorageError, match=r"unreachable.*timeout"):
            s.probe()
        assert time.monotonic() - started < 30
    finally:
        bucket.store.resume()
    s.probe()
