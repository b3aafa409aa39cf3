"""Checkpoint-storage URLs, object-store manifests and the sweep's decision (pure parts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.errors import CheckpointError, CheckpointStorageError
from kstream.runtime.checkpoint.objects import (
    FileEntry,
    Manifest,
    build_manifest,
    parse_manifest,
    unreferenced,
)
from kstream.runtime.checkpoint.open import open_storage
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage
from kstream.runtime.checkpoint.url import StorageURL, parse_storage_url
from kstream.runtime.config import JobRef, RunConfig


@pytest.mark.parametrize(
    ("text", "url"),
    [
        ("file:///var/kstream", StorageURL("file", "/var/kstream")),
        ("file:///var/kstream/", StorageURL("file", "/var/kstream")),
        ("file://localhost/a%20b", StorageURL("file", "/a b")),
        ("s3://bucket", StorageURL("s3", "", "bucket")),
        ("s3://my.bucket-1/a/b/", StorageURL("s3", "a/b", "my.bucket-1")),
    ],
)
def test_good_urls_parse(text: str, url: StorageURL) -> None:
    assert parse_storage_url(text) == url
    assert parse_storage_url(str(url)) == url


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("/var/kstream", "not a storage URL"),
        ("gs://bucket/p", "not a storage URL"),
        ("file://host/var", "names no host"),
        ("file:relative", "must be absolute"),
        ("s3://Bucket/p", "not an S3 bucket name"),
        ("s3://ab/p", "not an S3 bucket name"),
        ("s3://bucket/a//b", "empty, '.' or '..' segment"),
        ("s3://bucket/a/../b", "empty, '.' or '..' segment"),
        ("s3://bucket/p?x=1", "no query or fragment"),
    ],
)
def test_bad_urls_are_refused_with_one_line(text: str, why: str) -> None:
    with pytest.raises(CheckpointStorageError, match=why) as e:
        parse_storage_url(text)
    assert text in str(e.value)
    assert "\n" not in str(e.value)


def test_job_prefix_keeps_jobs_apart() -> None:
    assert parse_storage_url("s3://bucket").job_prefix("j") == "j/"
    assert parse_storage_url("s3://bucket/p/q").job_prefix("j") == "p/q/j/"


entries = st.builds(
    FileEntry,
    st.integers(0, 2**40),
    st.text("0123456789abcdef", min_size=64, max_size=64),
    st.sampled_from(["", "shared/ab.sst", "shared/cd.blob"]),
)


@given(
    st.dictionaries(st.from_regex(r"(db/)?[A-Za-z0-9_.-]{1,20}", fullmatch=True), entries),
    st.text("0123456789abcdef", max_size=16),
)
def test_manifests_round_trip(files: dict[str, FileEntry], attempt: str) -> None:
    assert parse_manifest(build_manifest(files, attempt), "m") == Manifest(files, attempt)


def test_a_manifest_of_the_layout_before_attempts_names_none() -> None:
    old = b'{"files": {"meta.json": {"size": 2, "sha256": "ab"}}}'
    assert parse_manifest(old, "m") == Manifest({"meta.json": FileEntry(2, "ab")}, "")


@pytest.mark.parametrize(
    "text",
    [
        b"not json",
        b"[]",
        b'{"files": {"a": {"size": "1", "sha256": "x"}}}',
        b'{"files": {"../a": {"size": 1, "sha256": "x"}}}',
        b'{"files": {"db/a": {"size": 1, "sha256": "x", "shared": "../other/x.sst"}}}',
        b'{"files": {}, "attempt": "../x"}',
        b'{"files": {}, "attempt": 7}',
    ],
)
def test_malformed_manifests_are_checkpoint_errors(text: bytes) -> None:
    with pytest.raises(CheckpointError, match="m is unreadable"):
        parse_manifest(text, "m")


def test_the_sweep_takes_only_unreferenced_tables_older_than_the_grace() -> None:
    shared = {"old-ref": 0.0, "old": 0.0, "young": 95.0, "young-ref": 95.0}
    assert unreferenced(shared, {"old-ref", "young-ref"}, now=100.0, grace_s=10.0) == ["old"]
    assert unreferenced(shared, set(), now=100.0, grace_s=200.0) == []


@given(
    st.dictionaries(st.text(max_size=5), st.floats(0, 1000)),
    st.sets(st.text(max_size=5)),
    st.floats(0, 2000),
    st.floats(0, 500),
)
def test_the_sweep_never_takes_a_referenced_or_young_table(
    shared: dict[str, float], referenced: set[str], now: float, grace_s: float
) -> None:
    for key in unreferenced(shared, referenced, now, grace_s):
        assert key not in referenced
        assert now - shared[key] > grace_s


def config(tmp_path: Path, url: str = "") -> RunConfig:
    return RunConfig(JobRef("m:job"), "127.0.0.1:1", 1, tmp_path, checkpoint_storage=url)


def test_the_storage_url_reaches_workers_in_the_configuration(tmp_path: Path) -> None:
    c = config(tmp_path, "s3://bucket/p")
    assert RunConfig.from_json(c.to_json()).checkpoint_storage == "s3://bucket/p"


def test_the_default_and_file_urls_are_local_directories(tmp_path: Path) -> None:
    default = open_storage(config(tmp_path), "job")
    assert isinstance(default, LocalCheckpointStorage)
    assert default.root == tmp_path / "job" / "checkpoints"
    shared = open_storage(config(tmp_path, f"file://{tmp_path}/shared"), "job")
    assert isinstance(shared, LocalCheckpointStorage)
    assert shared.root == tmp_path / "shared" / "job"


def test_an_unwritable_directory_is_refused_at_once(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(CheckpointStorageError, match="cannot be created"):
        open_storage(config(tmp_path, f"file://{tmp_path}/file/under"), "job")
