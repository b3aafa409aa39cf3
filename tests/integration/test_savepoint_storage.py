"""Savepoints written from a job's checkpoint storage and read back: S3 (S3Proxy) and files.

Self-contained (no shared tables), checksummed, described by savepoint.json; a
damaged or incomplete one is refused with one line.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from object_store import Bucket
from rocksdict import Options, Rdict
from test_object_checkpoints import JOB, TASK, Db, meta, storage

from kstream.errors import CheckpointError
from kstream.protocol.identity import JobIdentity
from kstream.runtime.checkpoint.savepoint import (
    FORMAT_VERSION,
    SavepointInfo,
    open_savepoint,
    write_savepoint,
)
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, SnapshotMeta

pytestmark = pytest.mark.s3

IDENTITY = JobIdentity(1, (1, 1), ("kafka:in",), ("kafka:out",), ("s1.process:count",), (), 128)


def info(n: int) -> SavepointInfo:
    return SavepointInfo(
        FORMAT_VERSION, JOB, n, IDENTITY, 128, (0, 1), "msgpack", 1.0, ("s1.count",)
    )


def taken(n: int) -> SnapshotMeta:
    """A snapshot of job `IDENTITY`."""
    return dataclasses.replace(meta(n), identity=IDENTITY.fingerprint)


def test_a_savepoint_of_an_s3_checkpoint_is_self_contained_and_reads_back(
    bucket: Bucket, tmp_path: Path
) -> None:
    db = Db(tmp_path)
    db.write(0, 1500)
    s = storage(bucket)
    s.store(taken(7), db.stage(), {"sink#0": [b"a"]})
    url = write_savepoint(s, [TASK], bucket.url("sp/one"), info(7), scratch=tmp_path)
    assert url == bucket.url("sp/one")
    keys = bucket.listing("sp/one/")
    assert "sp/one/savepoint.json" in keys
    assert not [k for k in keys if "/shared/" in k]
    manifest = json.loads(
        bucket.client.get_object(Bucket=bucket.name, Key=f"sp/one/chk-7/{TASK}/manifest.json")[
            "Body"
        ].read()
    )
    assert not [e for e in manifest["files"].values() if "shared" in e]
    # The job's checkpoints may go: the savepoint needs none of their objects.
    for key in bucket.listing(f"chk/{JOB}/"):
        bucket.client.delete_object(Bucket=bucket.name, Key=key)
    saved, read = open_savepoint(url)
    assert read == info(7)
    assert saved.load_payloads(7, TASK) == {"sink#0": [b"a"]}
    assert saved.fetch_db(7, TASK, tmp_path / "restored")
    restored = Rdict(str(tmp_path / "restored"), Options(raw_mode=True))
    assert sum(1 for _ in restored.items()) == 1500
    restored.close()
    with pytest.raises(CheckpointError, match="exists already"):
        write_savepoint(s, [TASK], url, info(7))


def test_a_damaged_or_incomplete_file_savepoint_is_refused(tmp_path: Path) -> None:
    db = Db(tmp_path)
    db.write(0, 500)
    s = LocalCheckpointStorage(tmp_path / "chk")
    s.store(taken(3), db.stage())
    target = tmp_path / "sp"
    url = write_savepoint(s, [TASK], f"file://{target}", info(3), scratch=tmp_path)
    assert open_savepoint(url)[1] == info(3)
    table = next((target / "chk-3" / TASK / "db").glob("*.sst"))
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0xFF
    table.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"damaged.*checksum"):
        open_savepoint(url)
    (target / "savepoint.json").unlink()
    with pytest.raises(CheckpointError, match="holds no savepoint"):
        open_savepoint(url)
    with pytest.raises(CheckpointError, match="does not exist"):
        open_savepoint(f"file://{tmp_path}/nowhere")


def test_a_savepoint_of_another_format_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "savepoint.json").write_text(json.dumps({"version": 99, "job": "x"}))
    with pytest.raises(CheckpointError, match="format version 99"):
        open_savepoint(f"file://{tmp_path}/sp")
