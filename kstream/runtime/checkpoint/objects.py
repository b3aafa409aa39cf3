"""Checkpoint storage in an S3 bucket (``--checkpoint-storage s3://bucket/prefix``).

Layout under ``<prefix>/<job>/``::

    shared/<sha256>.sst                 immutable RocksDB tables (and .blob files),
                                        content-addressed: put once, shared by checkpoints
    chk-<n>/<task>/<a>/db/<name>        the database's other files (MANIFEST-*, CURRENT, OPTIONS-*)
    chk-<n>/<task>/<a>/sink-<i>.wal     a sink's payload, if any
    chk-<n>/<task>/<a>/meta.json        `SnapshotMeta`
    chk-<n>/<task>/manifest.json        the attempt ``<a>``, and size and SHA-256 of
                                        every file above; put last, and only once

A manifest lists a table as ``db/<name>`` with ``"shared": "shared/<sha256>.sst"``.
It is put only after every other object of the snapshot was (a PUT that
returned is durable), so a snapshot without one is incomplete and never chosen.

**Written once.** ``<a>`` is a random token of each `store` (an attempt), named
by the manifest's ``"attempt"``: two writers of one checkpoint id of a subtask
never put the same key. A store finding a manifest there already (a ``head``
just before its put) drops its attempt with a `CheckpointError` (declined); the
window between the two requests only concerns a checkpoint that cannot complete
(the internals page on snapshots says why). The sweep collects attempts no
manifest names. A manifest without ``"attempt"`` names its files at
``chk-<n>/<task>/<rel>``, as before attempts.

**Incremental.** Per subtask, the tables of the newest checkpoint this process
knows completed (`note_complete`, from the control topic's ``Complete``) or
restored (`fetch_db`) are referenced without upload, by (name, size); every
other table is hashed and put. Tables of an aborted checkpoint are put again
when used: only completions are trusted. `forget` (a new generation) drops it all.

**Retention** (`sweep`, the runner): a checkpoint's ``chk-<n>/`` objects go as
for a local directory; then a shared table that no retained checkpoint's
manifest references and that is older than the checkpoint timeout plus a minute
(`shared_grace_s`) is deleted (`unreferenced`): younger ones may belong to a
checkpoint in flight, older ones to one aborted by its timeout.

**Checks.** Every file fetched is checked against its manifest's size and SHA-256;
a mismatch or a missing object raises `CheckpointError`, so the coordinator
falls back to an earlier checkpoint as for a damaged local one.

Puts and gets run on `TRANSFER_THREADS` threads (boto3 releases the GIL while
sending); `store` itself runs on the worker's snapshot thread.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from kstream.errors import CheckpointError, CheckpointStorageError
from kstream.runtime.checkpoint.object_manifest import (
    FileEntry,
    Manifest,
    build_manifest,
    parse_manifest,
    unreferenced,
)
from kstream.runtime.checkpoint.storage import (
    IMMUTABLE_DB_FILES,
    MANIFEST,
    MARSHAL_VERSION,
    WAL_MAGIC,
    SnapshotMeta,
)
from kstream.runtime.checkpoint.url import StorageURL

__all__ = [
    "TRANSFER_THREADS",
    "FileEntry",
    "Manifest",
    "ObjectCheckpointStorage",
    "build_manifest",
    "parse_manifest",
    "s3_client",
    "unreferenced",
]

#: Parallel puts and gets of one store, fetch or sweep.
TRANSFER_THREADS = 8
#: Bytes read from a response at a time while it is written and hashed.
_CHUNK = 1 << 20
#: Shared tables younger than this (plus the checkpoint timeout) are never swept.
SWEEP_MARGIN_S = 60.0

T = TypeVar("T")

log = logging.getLogger("kstream.checkpoints")


def s3_client(endpoint_url: str | None = None, *, probe: bool = False) -> Any:
    """A boto3 S3 client; `endpoint_url` overrides ``AWS_ENDPOINT_URL`` (None: as configured).

    Checksums only when an operation requires them: S3-compatible stores
    (S3Proxy, older MinIO) answer the newer default checksum headers with
    ``NotImplemented``, and every file's SHA-256 is checked anyway. Payloads are
    not signed either (see below). `probe`:
    short timeouts and no retries, for the start-up check.
    """
    import boto3
    from botocore.config import Config

    config = Config(
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        connect_timeout=3 if probe else 5,
        read_timeout=5 if probe else 20,
        retries={"max_attempts": 1 if probe else 3, "mode": "standard"},
        max_pool_connections=TRANSFER_THREADS * 2,
        # Over plain http (a local store) botocore would hash every body to sign it
        # and the store hash it again to check: measured 5x slower puts on S3Proxy.
        # Bodies are checked by their SHA-256 on restore; over https it is off anyway.
        s3={"payload_signing_enabled": False},
    )
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url or None, config=config)


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


#: A local table file as this process saw it: name, size, inode, modification time.
_LocalTable = tuple[str, int, int, int]


def _local(path: Path) -> _LocalTable:
    """The identity of the local file `path`, what trust in an uploaded table is keyed by.

    Name and size alone are not enough: a database built anew (a rescaled
    restore) numbers its tables from the start again, so its ``000009.sst``
    may have the size of an old lineage's one and other bytes. RocksDB's
    checkpoints hard-link the live tables, so a table keeps its inode and
    modification time from the download (or the first upload) to its
    compaction; a file built since has others, and is hashed and put.
    """
    st = path.stat()
    return (path.name, st.st_size, st.st_ino, st.st_mtime_ns)


def _cause(exc: BaseException) -> str:
    """One line for a failed request: the store's error code and message, or the exception."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and "Error" in response:
        err = response["Error"]
        return f"{err.get('Code', '?')}: {err.get('Message', '')}".strip()
    return f"{type(exc).__name__}: {exc}".split("\n", 1)[0]


def _is_missing(exc: BaseException) -> bool:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return False
    code = str(response.get("Error", {}).get("Code", ""))
    return code in ("NoSuchKey", "404", "NotFound")


class ObjectCheckpointStorage:
    """Job `job`'s snapshots in the bucket and prefix `url` names, through `client`
    (`s3_client`). `shared_grace_s`: the sweep's age rule (checkpoint timeout + a minute);
    `probe_client`: the client `probe` uses (short timeouts; default `client`)."""

    def __init__(
        self,
        url: StorageURL,
        job: str,
        client: Any,
        *,
        probe_client: Any = None,
        shared_grace_s: float = 660.0,
        self_contained: bool = False,
    ) -> None:
        self.bucket = url.bucket
        self.base = url.job_prefix(job)
        self.location = f"s3://{self.bucket}/{self.base}"
        self.client = client
        self.probe_client = probe_client if probe_client is not None else client
        self.shared_grace_s = shared_grace_s
        #: Tables are stored with their snapshot, not in ``shared/`` (a savepoint's).
        self.self_contained = self_contained
        self._lock = threading.Lock()
        #: Task -> local table (`_local`) -> shared key: tables referenced without upload.
        self._trusted: dict[str, dict[_LocalTable, FileEntry]] = {}
        #: (checkpoint, task) -> the tables stored with it, trusted once it completes.
        self._stored: dict[tuple[int, str], dict[_LocalTable, FileEntry]] = {}
        #: Manifests read (put once): (checkpoint, task) -> manifest.
        self._manifests: dict[tuple[int, str], Manifest] = {}
        #: Runs deletes and sweeps, one at a time, off the caller's thread.
        self._janitor = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-sweep")
        self._queued_sweep: Future[None] | None = None
        #: Bytes put by the last `store` (measured by the benchmark).
        self.last_put_bytes = 0

    # -- keys and requests --------------------------------------------------

    def _key(self, checkpoint: int, task: str, rel: str) -> str:
        return f"{self.base}chk-{checkpoint}/{task}/{rel}"

    def _parallel(self, fn: Callable[[T], Any], items: Iterable[T]) -> list[Any]:
        items = list(items)
        if len(items) <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(min(TRANSFER_THREADS, len(items))) as pool:
            return list(pool.map(fn, items))

    def _put(self, key: str, body: bytes | Path) -> int:
        try:
            if isinstance(body, Path):
                with body.open("rb") as f:
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=f)
                return body.stat().st_size
            self.client.put_object(Bucket=self.bucket, Key=key, Body=body)
            return len(body)
        except OSError as exc:
            raise CheckpointError(
                f"cannot read {exc.filename or key} to store it: {exc.strerror}"
            ) from None
        except Exception as exc:
            raise CheckpointError(f"{self.location}: putting {key} failed: {_cause(exc)}") from None

    def _get(self, key: str, entry: FileEntry, sink: Callable[[bytes], object]) -> None:
        """Stream object `key` into `sink`, checking it against `entry`."""
        digest = hashlib.sha256()
        size = 0
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            for chunk in iter(lambda: body.read(_CHUNK), b""):
                digest.update(chunk)
                size += len(chunk)
                sink(chunk)
        except Exception as exc:
            if _is_missing(exc):
                raise CheckpointError(f"s3://{self.bucket}/{key} is missing") from None
            raise CheckpointError(f"s3://{self.bucket}/{key}: get failed: {_cause(exc)}") from None
        if size != entry.size or digest.hexdigest() != entry.sha256:
            raise CheckpointError(
                f"s3://{self.bucket}/{key} does not match its checksum"
                f" ({size} bytes, the manifest says {entry.size})"
            )

    def _get_bytes(self, key: str, entry: FileEntry) -> bytes:
        parts: list[bytes] = []
        self._get(key, entry, parts.append)
        return b"".join(parts)

    def _list(self, prefix: str) -> Iterator[dict[str, Any]]:
        token: dict[str, str] = {}
        while True:
            page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, **token)
            yield from page.get("Contents", [])
            if not page.get("IsTruncated"):
                return
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def _exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            if _is_missing(exc):
                return False
            raise CheckpointError(f"s3://{self.bucket}/{key}: head failed: {_cause(exc)}") from None
        return True

    def _delete_quietly(self, keys: list[str]) -> None:
        """Delete `keys`, logging a failure: what is left is the sweep's."""
        try:
            self._delete(keys)
        except Exception as exc:
            log.warning(
                "cannot delete %d objects from %s: %s", len(keys), self.location, _cause(exc)
            )

    def _delete(self, keys: Iterable[str]) -> None:
        # One request per key: DeleteObjects needs a Content-MD5 or checksum header
        # that S3-compatible stores differ on.
        self._parallel(lambda k: self.client.delete_object(Bucket=self.bucket, Key=k), keys)

    # -- start-up -------------------------------------------------------------

    def probe(self) -> None:
        """Head the bucket, then put and delete a probe object under the prefix;
        `CheckpointStorageError` naming the URL and the cause if any request fails."""
        key = f"{self.base}probe-{uuid.uuid4().hex}"
        client = self.probe_client
        try:
            client.head_bucket(Bucket=self.bucket)
            client.put_object(Bucket=self.bucket, Key=key, Body=b"")
            client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            raise CheckpointStorageError(
                f"checkpoint storage {self.location} is unreachable: {_cause(exc)}"
            ) from None

    # -- worker side --------------------------------------------------------

    def store(
        self, meta: SnapshotMeta, staged_db: Path | None, payloads: dict[str, Any] | None = None
    ) -> None:
        """Put one subtask's snapshot, the manifest last; `staged_db` is removed.

        A failed request raises `CheckpointError` naming the key and the cause:
        the checkpoint is declined. What was put before stays until the sweep.
        """
        try:
            self._store(meta, staged_db, payloads)
        finally:
            if staged_db is not None:
                shutil.rmtree(staged_db, ignore_errors=True)

    def _store(
        self, meta: SnapshotMeta, staged_db: Path | None, payloads: dict[str, Any] | None
    ) -> None:
        n, task = meta.checkpoint, meta.task
        # Every object but the shared tables under a key of this attempt alone.
        attempt = uuid.uuid4().hex[:16]
        own = f"{attempt}/"
        with self._lock:
            trusted = dict(self._trusted.get(task, {}))
        files: dict[str, FileEntry] = {}
        tables: dict[_LocalTable, FileEntry] = {}
        #: (key, body) to put before the manifest.
        puts: list[tuple[str, bytes | Path]] = []
        hashing: list[Path] = []
        if staged_db is not None:
            if any(not p.is_file() for p in staged_db.iterdir()):
                raise CheckpointError(f"{staged_db} holds a directory: not a RocksDB checkpoint")
            for path in sorted(staged_db.iterdir()):
                rel = f"db/{path.name}"
                local = _local(path)
                known = trusted.get(local)
                if path.name.endswith(IMMUTABLE_DB_FILES) and known is not None:
                    files[rel] = known
                    tables[local] = known
                else:
                    hashing.append(path)
        for path, digest in zip(hashing, self._parallel(_sha256, hashing), strict=True):
            rel, size = f"db/{path.name}", path.stat().st_size
            if path.name.endswith(IMMUTABLE_DB_FILES) and not self.self_contained:
                shared = f"shared/{digest}{path.suffix}"
                files[rel] = tables[_local(path)] = FileEntry(size, digest, shared)
                puts.append((self.base + shared, path))
            else:
                files[rel] = FileEntry(size, digest)
                puts.append((self._key(n, task, own + rel), path))
        for i, (name, payload) in enumerate(sorted((payloads or {}).items())):
            if payload is None:
                continue
            data = WAL_MAGIC + marshal.dumps((name, payload), MARSHAL_VERSION)
            rel = f"sink-{i}.wal"
            files[rel] = FileEntry(len(data), hashlib.sha256(data).hexdigest())
            puts.append((self._key(n, task, own + rel), data))
        data = meta.to_json().encode()
        files["meta.json"] = FileEntry(len(data), hashlib.sha256(data).hexdigest())
        puts.append((self._key(n, task, own + "meta.json"), data))
        put = sum(self._parallel(lambda kb: self._put(*kb), puts))
        manifest = self._key(n, task, MANIFEST)
        if self._exists(manifest):
            # Another process stored it first (a zombie, or a replacement): that one stays.
            self._delete_quietly([k for k, _ in puts if k.startswith(self._key(n, task, own))])
            raise CheckpointError(
                f"checkpoint {n} of {task} was already stored by another process "
                f"(s3://{self.bucket}/{manifest}); this copy is dropped"
            )
        self._put(manifest, build_manifest(files, attempt))
        self.last_put_bytes = put
        with self._lock:
            self._stored[n, task] = tables

    def note_complete(self, checkpoint: int) -> None:
        with self._lock:
            for n, task in sorted(self._stored):
                if n == checkpoint:
                    self._trusted[task] = self._stored[n, task]
            self._stored = {k: v for k, v in self._stored.items() if k[0] > checkpoint}

    def forget(self) -> None:
        with self._lock:
            self._trusted.clear()
            self._stored.clear()

    def _manifest(self, checkpoint: int, task: str) -> Manifest:
        with self._lock:
            cached = self._manifests.get((checkpoint, task))
        if cached is not None:
            return cached
        key = self._key(checkpoint, task, MANIFEST)
        try:
            data = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except Exception as exc:
            if _is_missing(exc):
                raise CheckpointError(
                    f"checkpoint {checkpoint} has no complete snapshot of {task} in {self.location}"
                ) from None
            raise CheckpointError(f"s3://{self.bucket}/{key}: get failed: {_cause(exc)}") from None
        manifest = parse_manifest(data, f"s3://{self.bucket}/{key}")
        with self._lock:
            self._manifests[checkpoint, task] = manifest
        return manifest

    def _object(self, checkpoint: int, task: str, rel: str, entry: FileEntry, attempt: str) -> str:
        """The key of the object holding file `rel` of a snapshot stored by `attempt`."""
        if entry.shared:
            return self.base + entry.shared
        return self._key(checkpoint, task, f"{attempt}/{rel}" if attempt else rel)

    def load(self, checkpoint: int, task: str) -> SnapshotMeta:
        manifest = self._manifest(checkpoint, task)
        entry = manifest.files.get("meta.json")
        where = self._object(checkpoint, task, "meta.json", FileEntry(0, ""), manifest.attempt)
        if entry is None:
            raise CheckpointError(f"the manifest of s3://{self.bucket}/{where} lists no meta.json")
        try:
            return SnapshotMeta.from_json(self._get_bytes(where, entry).decode())
        except (ValueError, TypeError) as exc:
            raise CheckpointError(f"s3://{self.bucket}/{where} is unreadable: {exc}") from None

    def load_payload(self, checkpoint: int, task: str, name: str) -> Any:
        return self.load_payloads(checkpoint, task).get(name)

    def load_payloads(self, checkpoint: int, task: str) -> dict[str, Any]:
        """Every sink payload stored with the snapshot (name -> payload)."""
        manifest = self._manifest(checkpoint, task)
        files = manifest.files
        found: dict[str, Any] = {}
        for rel in sorted(r for r in files if r.startswith("sink-") and r.endswith(".wal")):
            key = self._object(checkpoint, task, rel, files[rel], manifest.attempt)
            data = self._get_bytes(key, files[rel])
            if not data.startswith(WAL_MAGIC):
                raise CheckpointError(f"s3://{self.bucket}/{key} is not a write-ahead file")
            try:
                stored, payload = marshal.loads(data[len(WAL_MAGIC) :])
            except (EOFError, ValueError, TypeError) as exc:
                raise CheckpointError(f"s3://{self.bucket}/{key} is unreadable: {exc}") from None
            found[stored] = payload
        return found

    def write_file(self, rel: str, data: bytes) -> None:
        """Put `data` at `rel` under the job's prefix (a savepoint's description)."""
        self._put(self.base + rel, data)

    def read_file(self, rel: str) -> bytes | None:
        """The object at `rel` under the job's prefix; None if there is none."""
        key = self.base + rel
        try:
            data: bytes = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            return data
        except Exception as exc:
            if _is_missing(exc):
                return None
            raise CheckpointError(f"s3://{self.bucket}/{key}: get failed: {_cause(exc)}") from None

    def fetch_db(self, checkpoint: int, task: str, target: Path) -> bool:
        """Get the snapshot's database into `target`, every file checked; its tables
        are then referenced without upload by this process's next snapshots."""
        manifest = self._manifest(checkpoint, task)
        db = {rel[3:]: e for rel, e in manifest.files.items() if rel.startswith("db/")}
        shutil.rmtree(target, ignore_errors=True)
        if not db:
            return False
        if any("/" in name for name in db):
            raise CheckpointError(f"checkpoint {checkpoint} of {task} lists a nested db file")
        target.mkdir(parents=True)

        def fetch(item: tuple[str, FileEntry]) -> None:
            name, entry = item
            with (target / name).open("wb") as f:
                key = self._object(checkpoint, task, f"db/{name}", entry, manifest.attempt)
                self._get(key, entry, f.write)

        try:
            self._parallel(fetch, sorted(db.items()))
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
        with self._lock:
            self._trusted[task] = {_local(target / n): e for n, e in db.items() if e.shared}
        return True

    # -- runner side ----------------------------------------------------------

    def completed(self) -> list[int]:
        ids: set[int] = set()
        token: dict[str, str] = {}
        while True:
            page = self.client.list_objects_v2(
                Bucket=self.bucket, Prefix=self.base, Delimiter="/", **token
            )
            for p in page.get("CommonPrefixes", []):
                name = p["Prefix"][len(self.base) :].rstrip("/")
                if name.startswith("chk-") and name[4:].isdigit():
                    ids.add(int(name[4:]))
            if not page.get("IsTruncated"):
                return sorted(ids)
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def validate(self, checkpoint: int, tasks: Iterable[str], identity: str = "") -> list[str]:
        """What is wrong with checkpoint `checkpoint` (empty: restorable, as far as a
        listing tells): every task's manifest and meta.json readable and right, and
        every listed object present with its size. Contents are checked on restore."""
        try:
            sizes = {
                o["Key"]: int(o["Size"])
                for prefix in (f"{self.base}chk-{checkpoint}/", f"{self.base}shared/")
                for o in self._list(prefix)
            }
        except Exception as exc:
            return [f"{self.location} cannot be listed: {_cause(exc)}"]
        for task in sorted(tasks):
            try:
                manifest = self._manifest(checkpoint, task)
                meta = self.load(checkpoint, task)
            except CheckpointError as exc:
                return [str(exc)]
            for rel, entry in sorted(manifest.files.items()):
                key = self._object(checkpoint, task, rel, entry, manifest.attempt)
                if key not in sizes:
                    return [f"s3://{self.bucket}/{key} is missing"]
                if sizes[key] != entry.size:
                    return [
                        f"s3://{self.bucket}/{key} has {sizes[key]} bytes,"
                        f" the manifest says {entry.size}"
                    ]
            where = f"{self.location}chk-{checkpoint}/{task}"
            if meta.checkpoint != checkpoint or meta.task != task:
                return [f"{where}/meta.json describes {meta.task} of checkpoint {meta.checkpoint}"]
            if identity and meta.identity != identity:
                return [f"{where} was taken by another job (identity {meta.identity or 'none'})"]
        return []

    def discard(self, checkpoint: int) -> None:
        """Delete checkpoint `checkpoint`'s own objects (not the shared tables: `sweep`).

        Returns at once: deletes run on a thread of their own, in order with
        sweeps (`settle` waits for them), so the runner's loop never waits for
        the store. A store that fails meanwhile is logged (one line), not raised:
        deleting frees space, nothing depends on it, and the next sweep tries again.
        """
        with self._lock:
            self._manifests = {k: v for k, v in self._manifests.items() if k[0] != checkpoint}
        self._janitor.submit(self._discard_now, checkpoint)

    def _discard_now(self, checkpoint: int) -> None:
        try:
            self._delete([o["Key"] for o in self._list(f"{self.base}chk-{checkpoint}/")])
        except Exception as exc:
            log.warning(
                "cannot delete checkpoint %d from %s: %s", checkpoint, self.location, _cause(exc)
            )

    def sweep(self, retained: Collection[int], below: int | None = None) -> list[int]:
        """Delete checkpoints as `LocalCheckpointStorage.sweep` does, then the shared
        tables `unreferenced` names.

        Returns at once, with an empty list: the sweep runs after the deletes
        queued before it, on their thread, and replaces a sweep still queued. A
        store that fails meanwhile is logged (one line), not raised: what is
        left is deleted by a later sweep.
        """
        if not retained:
            return []
        with self._lock:
            if self._queued_sweep is not None:
                self._queued_sweep.cancel()  # not yet started: this one supersedes it
            self._queued_sweep = self._janitor.submit(self._sweep_now, tuple(retained), below)
        return []

    def settle(self) -> None:
        """Wait until every delete and sweep asked for so far is done."""
        self._janitor.submit(lambda: None).result()

    def close(self, timeout_s: float) -> None:
        """Wait at most `timeout_s` for the deletes and sweeps asked for, then drop the
        ones not started. Called by the runner's stop: a delete running while the
        interpreter exits cannot start the threads it needs, and fails."""
        try:
            self._janitor.submit(lambda: None).result(timeout_s)
        except TimeoutError:
            log.warning(
                "deletes in %s not done in %.0fs; the next run's sweep does them",
                self.location,
                timeout_s,
            )
        self._janitor.shutdown(wait=False, cancel_futures=True)

    def _sweep_now(self, retained: Collection[int], below: int | None) -> None:
        try:
            self._sweep(retained, below)
        except Exception as exc:
            log.warning("cannot sweep %s: %s", self.location, _cause(exc))

    def _sweep(self, retained: Collection[int], below: int | None) -> list[int]:
        newest = max(retained) if below is None else below
        gone = [n for n in self.completed() if n < newest and n not in retained]
        for n in gone:
            self._discard_now(n)
        referenced: set[str] = set()
        #: Objects of retained snapshots whose manifest was read: an attempt that lost.
        own: dict[str, float] = {}
        for n in retained:
            prefix = f"{self.base}chk-{n}/"
            objects: dict[str, dict[str, float]] = {}
            for o in self._list(prefix):
                task = o["Key"][len(prefix) :].partition("/")[0]
                objects.setdefault(task, {})[o["Key"]] = o["LastModified"].timestamp()
            for task, found in objects.items():
                if self._key(n, task, MANIFEST) not in found:
                    continue  # incomplete (or a store in flight): only discard takes it
                try:
                    m = self._manifest(n, task)
                except CheckpointError:
                    continue  # unreadable: restoring it fails anyway; its objects stay
                referenced.update(
                    self._object(n, task, rel, e, m.attempt) for rel, e in m.files.items()
                )
                # Nor a "directory" some stores list (S3Proxy): its delete may take more.
                own.update((k, t) for k, t in found.items() if not k.endswith(("/", MANIFEST)))
        shared = {
            o["Key"]: o["LastModified"].timestamp() for o in self._list(f"{self.base}shared/")
        }
        # Taken once: the recheck below judges by the same (earlier, so safer) time.
        now = time.time()
        garbage = unreferenced({**shared, **own}, referenced, now, self.shared_grace_s)

        def still_garbage(key: str) -> bool:
            # A worker may have put the same table again since the listing (it was
            # in an aborted checkpoint, and is in one in flight): checked again
            # just before the delete, the window is one request long.
            try:
                head = self.client.head_object(Bucket=self.bucket, Key=key)
            except Exception:
                return False
            age = {key: head["LastModified"].timestamp()}
            return bool(unreferenced(age, referenced, now, self.shared_grace_s))

        self._delete(
            k for k, ok in zip(garbage, self._parallel(still_garbage, garbage), strict=True) if ok
        )
        return gone
