"""Savepoints: self-contained copies of a completed checkpoint, written on request.

A savepoint at URL ``U`` (``file:///abs/dir`` or ``s3://bucket/prefix/name``) is a
checkpoint storage of its own, laid out as a job's (``U/chk-<n>/<task>/...``,
each snapshot with its manifest of sizes and SHA-256), with two differences:
every file of a snapshot is stored with it (no ``shared/`` tables: nothing
outside ``U`` is referenced, so nothing sweeps it away and it can be moved or
copied as a whole), and ``U/savepoint.json`` (`SavepointInfo`) describes it,
written last: a savepoint without it is incomplete.

`write_savepoint` copies checkpoint `n` of a job's storage there, every file
checked against its checksum as it is read (a damaged checkpoint makes no
savepoint); `open_savepoint` reads one back.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kstream.errors import CheckpointError, CheckpointStorageError
from kstream.protocol.identity import JobIdentity
from kstream.runtime.checkpoint.objects import ObjectCheckpointStorage, s3_client
from kstream.runtime.checkpoint.storage import (
    LocalCheckpointStorage,
    ManagedCheckpointStorage,
)
from kstream.runtime.checkpoint.url import StorageURL, parse_storage_url

__all__ = [
    "DESCRIPTION",
    "FORMAT_VERSION",
    "SavepointInfo",
    "default_target",
    "open_savepoint",
    "parse_savepoint_url",
    "savepoint_storage",
    "write_savepoint",
]

#: The savepoint format this kstream writes and reads.
FORMAT_VERSION = 1
#: The description at the savepoint's root, written last.
DESCRIPTION = "savepoint.json"


@dataclass(frozen=True, slots=True)
class SavepointInfo:
    """What `savepoint.json` says of a savepoint.

    `parallelism`: per stage index, the parallelism the checkpoint was taken at.
    `states`: the state names (operator uids, ``s<stage>.<uid>``) it holds state
    for; empty when not recorded.
    """

    version: int
    job: str
    checkpoint: int
    identity: JobIdentity
    max_parallelism: int
    parallelism: tuple[int, ...]
    state_serde: str
    time: float
    states: tuple[str, ...] = field(default=())

    @property
    def tasks(self) -> list[str]:
        """The subtasks the savepoint holds a snapshot of."""
        return [f"s{s}-{i}" for s, p in enumerate(self.parallelism) for i in range(p)]

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "job": self.job,
                "checkpoint": self.checkpoint,
                "identity": self.identity.to_json(),
                "fingerprint": self.identity.fingerprint,
                "max_parallelism": self.max_parallelism,
                "parallelism": list(self.parallelism),
                "state_serde": self.state_serde,
                "states": list(self.states),
                "time": self.time,
            },
            indent=2,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | bytes, where: str) -> SavepointInfo:
        """Parse a description; `CheckpointError` naming `where` if malformed."""
        try:
            raw = json.loads(text)
            if not isinstance(raw, Mapping):
                raise TypeError("not a JSON object")
            version = raw["version"]
            if type(version) is not int:
                raise TypeError("version is not an integer")
            if version != FORMAT_VERSION:
                # Checked before the rest: another format may lay it out otherwise.
                return cls(version, str(raw.get("job", "")), 0, _NO_IDENTITY, 0, (), "", 0.0)
            return cls(
                version,
                str(raw["job"]),
                int(raw["checkpoint"]),
                JobIdentity.from_json(raw["identity"]),
                int(raw["max_parallelism"]),
                tuple(int(p) for p in raw["parallelism"]),
                str(raw["state_serde"]),
                float(raw["time"]),
                tuple(str(s) for s in raw.get("states", [])),
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise CheckpointError(f"{where} is not a savepoint description: {exc}") from None


_NO_IDENTITY = JobIdentity(0, (), (), (), ())


def parse_savepoint_url(text: str) -> StorageURL:
    """The savepoint location `text` names: ``file:///abs/dir`` or ``s3://bucket/prefix``
    (a prefix is needed: a savepoint is a directory, not a bucket); one line if not."""
    try:
        url = parse_storage_url(text)
    except CheckpointStorageError as exc:
        raise CheckpointStorageError(
            str(exc).replace(f"--checkpoint-storage {text!r}", f"savepoint {text!r}")
        ) from None
    if url.scheme == "s3" and not url.path:
        raise CheckpointStorageError(
            f"savepoint {text!r}: name a prefix in the bucket (s3://bucket/prefix)"
        )
    if url.scheme == "file" and url.path == "/":
        raise CheckpointStorageError(f"savepoint {text!r}: name a directory, not /")
    return url


def _storage(url: StorageURL, s3_endpoint_url: str, *, create: bool) -> ManagedCheckpointStorage:
    if url.scheme == "file":
        root = Path(url.path)
        if not create and not root.is_dir():
            raise CheckpointError(f"savepoint {url} does not exist")
        try:
            return LocalCheckpointStorage(root)
        except OSError as exc:
            raise CheckpointError(
                f"savepoint {url} cannot be created: {exc.strerror or exc}"
            ) from None
    parent, _, name = url.path.rpartition("/")
    try:
        client = s3_client(s3_endpoint_url or None)
    except Exception as exc:  # botocore: a bad region, endpoint or profile
        raise CheckpointStorageError(
            f"savepoint {url} cannot be used: {type(exc).__name__}: {exc}"
        ) from None
    return ObjectCheckpointStorage(
        StorageURL("s3", parent, url.bucket), name, client, self_contained=True
    )


def savepoint_storage(
    text: str, *, s3_endpoint_url: str = "", create: bool = False
) -> ManagedCheckpointStorage:
    """The storage of the savepoint at `text`, without reading its description: for
    writers that build a savepoint in parts (`create`) and write `DESCRIPTION` last."""
    return _storage(parse_savepoint_url(text), s3_endpoint_url, create=create)


def default_target(storage: ManagedCheckpointStorage, job: str, checkpoint: int) -> str:
    """Where a savepoint of `checkpoint` goes without ``--target``: ``savepoints/`` in
    the job's checkpoint storage (never swept: retention touches only ``chk-*`` and
    ``shared/``), named by job, checkpoint and UTC time."""
    name = f"{job}-{checkpoint}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    if isinstance(storage, ObjectCheckpointStorage):
        return f"s3://{storage.bucket}/{storage.base}savepoints/{name}"
    if isinstance(storage, LocalCheckpointStorage):
        return f"file://{storage.root}/savepoints/{name}"
    raise CheckpointError(f"no default savepoint location in {storage.location}: name --target")


def write_savepoint(
    source: ManagedCheckpointStorage,
    tasks: Iterable[str],
    target: str,
    info: SavepointInfo,
    *,
    s3_endpoint_url: str = "",
    scratch: Path | None = None,
) -> str:
    """Copy checkpoint `info.checkpoint` of `source` (its snapshots of `tasks`) to the
    savepoint `target`, then its description; return the savepoint's URL.

    Every file read is checked against its manifest (`fetch_db`, `load`); the
    copy is stored with fresh manifests (sizes and SHA-256). `scratch`: where a
    database is staged between reading and writing (a temporary directory by
    default). Raises `CheckpointError` (one line) on any failure; a target that
    already holds a savepoint is refused.
    """
    url = parse_savepoint_url(target)
    out = _storage(url, s3_endpoint_url, create=True)
    if out.read_file(DESCRIPTION) is not None:
        raise CheckpointError(f"savepoint {url} exists already")
    n = info.checkpoint
    work = Path(tempfile.mkdtemp(prefix="savepoint-", dir=scratch))
    try:
        for task in tasks:
            meta = source.load(n, task)
            db = work / task
            has_db = source.fetch_db(n, task, db)
            payloads: dict[str, Any] = source.load_payloads(n, task)
            out.store(meta, db if has_db else None, payloads)
        out.write_file(DESCRIPTION, info.to_json().encode())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return str(url)


def open_savepoint(
    text: str, *, s3_endpoint_url: str = "", validate: bool = True
) -> tuple[ManagedCheckpointStorage, SavepointInfo]:
    """The savepoint at `text`: its storage and description.

    Raises `CheckpointError` (one line) when it is missing, incomplete (no
    description), of another format version, or (with `validate`) its snapshots
    are not all present and intact (every file's size and SHA-256). Without
    `validate` the caller checks each snapshot it reads (`validate` of the storage
    for that task): a reader spread over many processes checks each there.
    """
    url = parse_savepoint_url(text)
    storage = _storage(url, s3_endpoint_url, create=False)
    data = storage.read_file(DESCRIPTION)
    if data is None:
        raise CheckpointError(f"{url} holds no savepoint ({DESCRIPTION} is missing)")
    info = SavepointInfo.from_json(data, f"{url}/{DESCRIPTION}")
    if info.version != FORMAT_VERSION:
        raise CheckpointError(
            f"savepoint {url} is of format version {info.version}; this kstream reads "
            f"version {FORMAT_VERSION}"
        )
    problems = (
        storage.validate(info.checkpoint, info.tasks, info.identity.fingerprint) if validate else []
    )
    if problems:
        raise CheckpointError(f"savepoint {url} is damaged: {problems[0]}")
    return storage, info
