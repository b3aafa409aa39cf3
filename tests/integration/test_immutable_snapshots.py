"""Two writers of one checkpoint id never overwrite each other's snapshot.

A zombie worker and its replacement may both store checkpoint `n` of a
subtask before the coordinator fences one. The first snapshot stays as it was
stored, whole; the second is refused (`CheckpointError`, so it is declined).
Against S3Proxy for the object store, a directory for the local storage.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from object_store import Bucket
from rocksdict import Checkpoint, Options, Rdict

from kstream.errors import CheckpointError
from kstream.runtime.checkpoint.objects import (
    FileEntry,
    ObjectCheckpointStorage,
    build_manifest,
    s3_client,
)
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, SnapshotMeta
from kstream.runtime.checkpoint.url import parse_storage_url

JOB = "job1"
TASK = "s1-0"


def storage(bucket: Bucket, *, grace_s: float = 660.0) -> ObjectCheckpointStorage:
    return ObjectCheckpointStorage(
        parse_storage_url(bucket.url()), JOB, s3_client(), shared_grace_s=grace_s
    )


def staged(path: Path, values: range) -> Path:
    """A RocksDB checkpoint holding `values`, staged as a worker stages one."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    db = Rdict(str(path / "live"), opts)
    for i in values:
        db[f"k{i:06d}".encode()] = hashlib.sha256(str(i).encode()).digest()
    db.flush()
    Checkpoint(db).create_checkpoint(str(path / "staged"))
    db.close()
    return path / "staged"


def meta(n: int, offset: int) -> SnapshotMeta:
    """Checkpoint `n` of `TASK`; `offset` tells one writer's snapshot from the other's."""
    return SnapshotMeta(checkpoint=n, generation=4, task=TASK, source_offsets={"in": {0: offset}})


def keys(path: Path) -> int:
    db = Rdict(str(path), Options(raw_mode=True))
    try:
        return sum(1 for _ in db.items())
    finally:
        db.close()


@pytest.mark.s3
def test_the_second_writer_of_a_checkpoint_never_overwrites_the_first(
    bucket: Bucket, tmp_path: Path
) -> None:
    first, second = storage(bucket), storage(bucket)  # two processes
    first.store(meta(7, 100), staged(tmp_path / "a", range(500)), {"sink#0": ["first"]})
    before = bucket.listing(f"chk/{JOB}/chk-7/")
    with pytest.raises(CheckpointError, match="already stored by another process"):
        second.store(meta(7, 999), staged(tmp_path / "b", range(800)), {"sink#0": ["second"]})
    # Not one object of the first snapshot changed; the second's own objects are gone.
    assert bucket.listing(f"chk/{JOB}/chk-7/") == before
    reader = storage(bucket)
    assert reader.validate(7, [TASK]) == []
    assert reader.load(7, TASK) == meta(7, 100)
    assert reader.load_payload(7, TASK, "sink#0") == ["first"]
    assert reader.fetch_db(7, TASK, tmp_path / "restored")
    assert keys(tmp_path / "restored") == 500


@pytest.mark.s3
def test_objects_are_put_under_a_key_of_their_attempt_alone(bucket: Bucket, tmp_path: Path) -> None:
    s = storage(bucket)
    s.store(meta(3, 1), staged(tmp_path / "a", range(10)))
    manifest = json.loads(
        bucket.client.get_object(Bucket=bucket.name, Key=f"chk/{JOB}/chk-3/{TASK}/manifest.json")[
            "Body"
        ].read()
    )
    attempt = manifest["attempt"]
    own = [
        k
        for k in bucket.listing(f"chk/{JOB}/chk-3/")
        if not k.endswith(("/manifest.json", "/"))  # S3Proxy lists its directories
    ]
    assert own
    assert all(k.startswith(f"chk/{JOB}/chk-3/{TASK}/{attempt}/") for k in own)


@pytest.mark.s3
def test_the_sweep_collects_an_attempt_no_manifest_names(bucket: Bucket, tmp_path: Path) -> None:
    s = storage(bucket, grace_s=0.0)
    s.store(meta(5, 1), staged(tmp_path / "a", range(50)))
    kept = bucket.listing(f"chk/{JOB}/chk-5/")
    # What a losing writer killed before it could delete its own objects leaves.
    lost = [f"chk/{JOB}/chk-5/{TASK}/0123456789abcdef/{rel}" for rel in ("meta.json", "db/CURRENT")]
    for key in lost:
        bucket.client.put_object(Bucket=bucket.name, Key=key, Body=b"{}")
    s.sweep([5])
    s.settle()
    assert bucket.listing(f"chk/{JOB}/chk-5/") == kept
    assert storage(bucket).validate(5, [TASK]) == []
    # Young, it would have stayed (a store in flight is not garbage).
    young = storage(bucket, grace_s=600.0)
    for key in lost:
        bucket.client.put_object(Bucket=bucket.name, Key=key, Body=b"{}")
    young.sweep([5])
    young.settle()
    assert set(lost) <= set(bucket.listing(f"chk/{JOB}/chk-5/"))


@pytest.mark.s3
def test_a_snapshot_of_the_layout_before_attempts_is_still_read(
    bucket: Bucket, tmp_path: Path
) -> None:
    prefix = f"chk/{JOB}/chk-2/{TASK}/"
    body = meta(2, 42).to_json().encode()
    bucket.client.put_object(Bucket=bucket.name, Key=prefix + "meta.json", Body=body)
    files = {"meta.json": FileEntry(len(body), hashlib.sha256(body).hexdigest())}
    bucket.client.put_object(
        Bucket=bucket.name, Key=prefix + "manifest.json", Body=build_manifest(files)
    )
    s = storage(bucket, grace_s=0.0)
    assert s.validate(2, [TASK]) == []
    assert s.load(2, TASK) == meta(2, 42)
    s.sweep([2])
    s.settle()
    assert bucket.listing(prefix) == [prefix + "manifest.json", prefix + "meta.json"]


def test_a_local_second_writer_never_overwrites_the_first(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    first, second = LocalCheckpointStorage(root), LocalCheckpointStorage(root)
    first.store(meta(7, 100), staged(tmp_path / "a", range(500)), {"sink#0": ["first"]})
    snapshot = root / "chk-7" / TASK
    before = {p: p.read_bytes() for p in snapshot.rglob("*") if p.is_file()}
    with pytest.raises(CheckpointError, match="already stored by another process"):
        second.store(meta(7, 999), staged(tmp_path / "b", range(800)), {"sink#0": ["second"]})
    assert {p: p.read_bytes() for p in snapshot.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in (root / "chk-7").iterdir()) == [TASK]  # no attempt left
    assert first.validate(7, [TASK]) == []
    assert first.load(7, TASK) == meta(7, 100)
    assert first.fetch_db(7, TASK, tmp_path / "restored")
    assert keys(tmp_path / "restored") == 500


def test_a_local_partial_snapshot_of_an_older_kstream_is_replaced(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    partial = root / "chk-7" / TASK
    partial.mkdir(parents=True)
    (partial / "meta.json").write_text("{")  # killed before its manifest
    s = LocalCheckpointStorage(root)
    s.store(meta(7, 1), None)
    assert s.validate(7, [TASK]) == []
