"""Checkpoint storage: where subtask snapshots live once they are durable.

Layout of the local implementation (``<state-dir>/<job>/checkpoints``)::

    chk-<n>/<task>/db/          RocksDB checkpoint of the subtask's state (absent if stateless)
    chk-<n>/<task>/sink-<i>.wal     a sink's payload (write-ahead records), if any
    chk-<n>/<task>/meta.json    `SnapshotMeta`
    chk-<n>/<task>/manifest.json    size and SHA-256 of every file above, written last
                                (atomic rename): its presence means the snapshot is complete

A snapshot's database is a *copy* of the RocksDB checkpoint, not hard links to
it: RocksDB's checkpoint links its files with the live database, and links
would make one damaged live file (or one damaged retained checkpoint) damage
every checkpoint sharing it, including the one a recovery falls back to.
`benchmarks/checkpoint_store_bench.py` measures what copying and checksums cost.
`validate` checks a stored checkpoint against its manifests before it is restored.

A shared file system implements it too (``--checkpoint-storage file:///mnt/...``);
an object store does in `kstream.runtime.checkpoint.objects` (``s3://``), and
`kstream.runtime.checkpoint.open` builds the one a run's configuration names.
"""

from __future__ import annotations

import errno
import hashlib
import json
import marshal
import os
import re
import shutil
import uuid
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kstream.errors import CheckpointError, CheckpointStorageError

__all__ = [
    "CheckpointStorage",
    "LocalCheckpointStorage",
    "ManagedCheckpointStorage",
    "SnapshotMeta",
    "check_state_serde",
    "storage_failure",
]

#: Marshal's format version, fixed so that a newer Python writes what this one reads.
MARSHAL_VERSION = 4
#: First bytes of a sink payload file: the format and its version.
WAL_MAGIC = b"KSWAL\x01"
#: Name of the per-snapshot manifest; written last, so its presence means complete.
MANIFEST = "manifest.json"
#: Format version of meta.json. 1: before versions (and key formats) were
#: recorded); 2: adds `version` and `key_format`; 3: adds `channel_replay`
#: (unaligned checkpoints); 4: adds `max_parallelism` and `parallelism` (key
#: groups, key format 3). A newer one is refused.
SNAPSHOT_VERSION = 4
#: Key formats this kstream reads (`kstream.runtime.state.store`).
_KEY_FORMATS = (1, 2, 3)


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """What a subtask's snapshot holds besides its state.

    Offsets are *next offsets to read*: a restore resumes each input there.
    `channel_offsets` are the positions just after barrier `checkpoint`, or,
    for a channel whose state an unaligned snapshot recorded, the start of
    that offset range; `channel_replay` then gives its replay windows
    (`kstream.protocol.barrier.Replay`) as ``[end, generation]`` pairs.
    """

    checkpoint: int
    generation: int
    task: str
    source_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    channel_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    has_state: bool = False
    size: int = 0
    alignment_ms: float = 0.0
    sync_ms: float = 0.0
    sink: dict[str, Any] = field(default_factory=dict)
    #: `JobIdentity.fingerprint` of the job that took the snapshot ("" if unknown).
    identity: str = ""
    #: `StateSerde.name` of the state's encoding ("" if taken before serdes were
    #: recorded, when state was pickled; see `check_state_serde`).
    state_serde: str = ""
    #: Event time: a source subtask's ``{"source": SourceWatermarks.snapshot()}``
    #: or a channel subtask's ``{"input": InputWatermarks.snapshot()}`` (plain
    #: ints); empty for a stage without timestamps.
    watermarks: dict[str, Any] = field(default_factory=dict)
    #: Encoding of keys in state and routing (`kstream.runtime.state.store`); 1 if
    #: taken before key formats were recorded. A resumed job keeps it.
    key_format: int = 2
    #: Topic -> partition -> ``[[end, generation], ...]``: old-generation records
    #: a restore processes (recorded channel state); empty before version 3.
    channel_replay: dict[str, dict[int, list[list[int]]]] = field(default_factory=dict)
    #: The job's number of key groups (`kstream.protocol.key_groups`); 0 before
    #: version 4 (key formats 1 and 2 have none).
    max_parallelism: int = 0
    #: The parallelism of the subtask's stage when the snapshot was taken (0 before
    #: version 4): a restore at another one splits or merges the state.
    parallelism: int = 0
    #: Format version of this record (`SNAPSHOT_VERSION`; 1 if not recorded).
    version: int = SNAPSHOT_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> SnapshotMeta:
        """Parse and check `to_json`'s output (of this or an earlier version).

        `ValueError` naming what is wrong if it is not JSON, is of a newer or
        unknown version, lacks `checkpoint`, `generation` or `task`, has a field
        this version does not know or one of the wrong type: a crafted or
        damaged file is refused, never half-read.
        """
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError(f"a JSON {type(raw).__name__}, not an object")
        version = raw.setdefault("version", 1)
        if type(version) is not int or not 1 <= version <= SNAPSHOT_VERSION:
            raise ValueError(
                f"snapshot format version {version!r} is not one this kstream reads"
                f" (1 to {SNAPSHOT_VERSION}): written by a newer kstream?"
            )
        # Version 1 predates key formats: its keys are in format 1.
        raw.setdefault("key_format", 1)
        missing = [f for f in ("checkpoint", "generation", "task") if f not in raw]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        unknown = sorted(set(raw) - set(_FIELD_TYPES))
        if unknown:
            raise ValueError(f"unknown field {unknown[0]!r} for format version {version}")
        for name, value in raw.items():
            if name.endswith("_offsets"):
                raw[name] = _offsets(name, value)
            elif name == "channel_replay":
                raw[name] = _replay(value)
            elif not _is(value, _FIELD_TYPES[name]):
                raise ValueError(f"{name} is {value!r}, not {_FIELD_TYPES[name].__name__}")
        if raw["key_format"] not in _KEY_FORMATS:
            raise ValueError(f"key format {raw['key_format']!r} is not one this kstream reads")
        return cls(**raw)


#: The JSON type of each `SnapshotMeta` field (offsets are checked by `_offsets`).
_FIELD_TYPES: dict[str, type] = {
    "checkpoint": int,
    "generation": int,
    "task": str,
    "source_offsets": dict,
    "channel_offsets": dict,
    "has_state": bool,
    "size": int,
    "alignment_ms": float,
    "sync_ms": float,
    "sink": dict,
    "identity": str,
    "state_serde": str,
    "watermarks": dict,
    "key_format": int,
    "version": int,
    "channel_replay": dict,
    "max_parallelism": int,
    "parallelism": int,
}


def _is(value: Any, expected: type) -> bool:
    if expected is float:
        return type(value) in (int, float)
    if expected is int:
        return type(value) is int  # not bool
    return isinstance(value, expected)


def _offsets(name: str, value: Any) -> dict[str, dict[int, int]]:
    """Offsets by topic and partition from JSON (partition keys are strings there)."""
    try:
        if not isinstance(value, dict):
            raise TypeError
        out = {}
        for topic, parts in value.items():
            if not isinstance(parts, dict):
                raise TypeError
            out[topic] = {int(p): o for p, o in parts.items()}
            if not all(type(o) is int for o in out[topic].values()):
                raise TypeError
        return out
    except (TypeError, ValueError):
        raise ValueError(f"{name} is not offsets by topic and partition: {value!r:.200}") from None


def _replay(value: Any) -> dict[str, dict[int, list[list[int]]]]:
    """Replay windows by topic and partition from JSON: lists of [end, generation]."""
    try:
        if not isinstance(value, dict):
            raise TypeError
        out: dict[str, dict[int, list[list[int]]]] = {}
        for topic, parts in value.items():
            if not isinstance(parts, dict):
                raise TypeError
            out[topic] = {}
            for p, windows in parts.items():
                if not isinstance(windows, list) or not all(
                    isinstance(w, list) and len(w) == 2 and all(type(x) is int for x in w)
                    for w in windows
                ):
                    raise TypeError
                out[topic][int(p)] = windows
        return out
    except (TypeError, ValueError):
        raise ValueError(f"channel_replay is not replay windows: {value!r:.200}") from None


def check_state_serde(meta: SnapshotMeta, serde: str) -> None:
    """Raise `CheckpointError` unless state written as `meta` says can be read with `serde`.

    A snapshot without a recorded serde was taken when state was always
    pickled: only ``trusted-pickle`` reads it (any other would misread it, and
    loading pickle runs code, so the job must choose it knowingly).
    """
    if not meta.has_state:
        return
    written = meta.state_serde or "trusted-pickle"
    if written == serde:
        return
    if not meta.state_serde:
        raise CheckpointError(
            f"checkpoint {meta.checkpoint} of {meta.task} holds pickled state (taken before state"
            f" serdes were recorded); the job's state serde is {serde}: restore it with"
            " Job(..., state_serde='trusted-pickle') if you trust it, or start without it"
        )
    raise CheckpointError(
        f"checkpoint {meta.checkpoint} of {meta.task} holds state written with the"
        f" {written} state serde; the job's is {serde}: run with state_serde={written!r}"
        " or start without the checkpoint"
    )


class CheckpointStorage(Protocol):
    """Durable storage of snapshots. Methods may block; workers call `store` off-thread."""

    def store(
        self, meta: SnapshotMeta, staged_db: Path | None, payloads: dict[str, Any] | None = None
    ) -> None:
        """Make the snapshot durable; `staged_db` (a local RocksDB checkpoint) may be moved.

        `payloads` (sink name -> a value built of bytes, str, int, float, bool,
        None, tuples, lists and dicts) are serialized here, off the processing
        thread, with `marshal`: ten times faster than pickle on lists of records
        (it holds the GIL, so this is time the processing thread waits), and
        loading it runs no code.
        """

    def load_payload(self, checkpoint: int, task: str, name: str) -> Any:
        """A sink payload stored with the snapshot, or None."""

    def load(self, checkpoint: int, task: str) -> SnapshotMeta:
        """The metadata of a stored snapshot; `CheckpointError` if absent."""

    def fetch_db(self, checkpoint: int, task: str, target: Path) -> bool:
        """Copy the snapshot's database to `target`; False if the task has no state."""

    def discard(self, checkpoint: int) -> None:
        """Delete a checkpoint (retention)."""

    def note_complete(self, checkpoint: int) -> None:
        """Checkpoint `checkpoint` completed (the control topic said so): what this
        process stored for it may be referenced by later snapshots without a copy."""

    def forget(self) -> None:
        """A new generation begins: trust nothing stored before (until a restore)."""


class ManagedCheckpointStorage(CheckpointStorage, Protocol):
    """What the runner does with checkpoint storage besides what workers do."""

    #: Where the job's checkpoints are, for people (a directory or a URL).
    location: str

    def probe(self) -> None:
        """Raise `CheckpointStorageError` (one line) unless the storage takes writes."""

    def completed(self) -> list[int]:
        """Ids of the checkpoints that have anything stored (complete or not)."""

    def validate(self, checkpoint: int, tasks: Iterable[str], identity: str = "") -> list[str]:
        """What is wrong with stored checkpoint `checkpoint` (empty: restorable)."""

    def sweep(self, retained: Collection[int], below: int | None = None) -> list[int]:
        """Delete stored checkpoints older than the newest of `retained` (or `below`)
        and not in it, and what only they used; return the ids deleted."""

    def load_payloads(self, checkpoint: int, task: str) -> dict[str, Any]:
        """Every sink payload stored with a snapshot (name -> payload)."""

    def write_file(self, rel: str, data: bytes) -> None:
        """Store `data` at `rel` in the job's storage (a savepoint's description)."""

    def read_file(self, rel: str) -> bytes | None:
        """The bytes at `rel` in the job's storage; None if absent."""

    def close(self, timeout_s: float) -> None:
        """Finish, within `timeout_s`, the deletes asked for so far (the runner's stop);
        what is left then is deleted by the next run's sweep."""


def _link_or_copy(src: str, dst: str) -> str:
    # Only for measuring: links share inodes, so damage to one copy is damage to all.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


#: The files of a RocksDB database that are immutable once written: SST tables and blobs.
IMMUTABLE_DB_FILES = (".sst", ".blob")


def _link_table_or_copy(src: str, dst: str) -> str:
    """Link `src` at `dst` if it is an immutable RocksDB file; copy it otherwise.

    Copies where linking fails (another file system, no hard links).
    """
    if src.endswith(IMMUTABLE_DB_FILES):
        try:
            os.link(src, dst)
            return dst
        except OSError:
            pass
    return str(shutil.copy2(src, dst))


def storage_failure(exc: OSError | shutil.Error, where: Path) -> str:
    """One line for a failed write into `where`: the cause, then the file
    (``<cause>: <path>``; `where` itself when the error names no file, as a
    failed ``write`` or ``fsync`` does not).

    `shutil.copytree` gathers its failures into one `shutil.Error` whose text is
    the repr of a list of (source, target, text) tuples: the first names the cause
    and the target here, the rest are counted.
    """
    if isinstance(exc, shutil.Error):
        failures = exc.args[0] if exc.args and isinstance(exc.args[0], list) else []
        if not failures or not isinstance(failures[0], tuple) or len(failures[0]) != 3:
            return str(exc)
        _, target, why = failures[0]
        # "[Errno 28] No space left on device" (or with ": '<path>'" after it).
        cause = re.sub(r"^\[Errno \d+\] ", "", str(why)).split(": '", 1)[0]
        more = f" (and {len(failures) - 1} more files)" if len(failures) > 1 else ""
        return f"{cause}: {target}{more}"
    cause = exc.strerror or str(exc) or type(exc).__name__
    return f"{cause}: {exc.filename if exc.filename is not None else where}"


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


class LocalCheckpointStorage:
    """Snapshots in a local directory.

    `link_files` and `checksums` exist to measure their cost; the defaults
    (copies, checksums) are what keeps a fallback checkpoint intact and detectable.
    """

    def __init__(self, root: Path, *, link_files: bool = False, checksums: bool = True) -> None:
        self.root = root
        self.location = str(root)
        self.link_files = link_files
        self.checksums = checksums
        root.mkdir(parents=True, exist_ok=True)

    def probe(self) -> None:
        """Raise `CheckpointStorageError` unless a file can be written in the root."""
        probe = self.root / f".probe-{os.getpid()}"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise CheckpointStorageError(
                f"checkpoint storage {self.root} is not writable: {storage_failure(exc, probe)}"
            ) from None

    def note_complete(self, checkpoint: int) -> None:
        """Nothing: every local snapshot is a full copy."""

    def forget(self) -> None:
        """Nothing: every local snapshot is a full copy."""

    def _dir(self, checkpoint: int, task: str) -> Path:
        return self.root / f"chk-{checkpoint}" / task

    def store(
        self, meta: SnapshotMeta, staged_db: Path | None, payloads: dict[str, Any] | None = None
    ) -> None:
        """Store one subtask's snapshot; `staged_db` is removed whether or not it succeeds.

        A failure (a full or read-only disk) raises `CheckpointError` naming the
        cause and a file it could not write (`storage_failure`), and leaves no
        partial snapshot behind: the checkpoint is then declined and the staged
        copy would only take space from the live state.

        Immutable: the snapshot is written in a directory of its own beside the
        target and renamed into place, which fails if the target exists. A second
        writer of the same checkpoint and subtask (a zombie and its replacement,
        sharing the directory) raises `CheckpointError` and leaves the first's
        snapshot as it was.
        """
        target = self._dir(meta.checkpoint, meta.task)
        attempt = target.with_name(f".{meta.task}.{uuid.uuid4().hex[:16]}.tmp")
        try:
            self._store(attempt, meta, staged_db, payloads)
            self._place(attempt, target)
        except (OSError, shutil.Error) as exc:
            # Named as the snapshot's place: the attempt's is gone by then.
            why = storage_failure(exc, target).replace(str(attempt), str(target))
            raise CheckpointError(why) from exc
        finally:
            shutil.rmtree(attempt, ignore_errors=True)
            if staged_db is not None:
                shutil.rmtree(staged_db, ignore_errors=True)

    def _place(self, attempt: Path, target: Path) -> None:
        """Rename the complete snapshot `attempt` to `target`, unless one is there."""
        try:
            attempt.rename(target)
            return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        if (target / MANIFEST).exists():
            raise CheckpointError(
                f"checkpoint of {target.name} in {target.parent} was already stored by "
                "another process; this copy is dropped"
            )
        # A partial snapshot of an older kstream (written in place, then killed):
        # never restorable, so replaced.
        shutil.rmtree(target, ignore_errors=True)
        attempt.rename(target)

    def _store(
        self,
        target: Path,
        meta: SnapshotMeta,
        staged_db: Path | None,
        payloads: dict[str, Any] | None,
    ) -> None:
        target.mkdir(parents=True)
        if staged_db is not None:
            copy = _link_or_copy if self.link_files else shutil.copyfile
            shutil.copytree(staged_db, target / "db", copy_function=copy)
        for i, (name, payload) in enumerate(sorted((payloads or {}).items())):
            if payload is None:
                continue
            path = target / f"sink-{i}.wal"
            with path.open("wb") as f:
                f.write(WAL_MAGIC)
                marshal.dump((name, payload), f, MARSHAL_VERSION)
                f.flush()
                os.fsync(f.fileno())
        with (target / "meta.json").open("w") as f:
            f.write(meta.to_json())
            f.flush()
            os.fsync(f.fileno())
        files = {}
        for path in sorted(p for p in target.rglob("*") if p.is_file()):
            entry: dict[str, Any] = {"size": path.stat().st_size}
            if self.checksums:
                entry["sha256"] = _sha256(path)
            files[path.relative_to(target).as_posix()] = entry
        with (target / MANIFEST).open("w") as f:
            f.write(json.dumps({"files": files}, sort_keys=True))
            f.flush()
            os.fsync(f.fileno())

    def load(self, checkpoint: int, task: str) -> SnapshotMeta:
        path = self._dir(checkpoint, task) / "meta.json"
        try:
            return SnapshotMeta.from_json(path.read_text())
        except FileNotFoundError:
            raise CheckpointError(
                f"checkpoint {checkpoint} has no snapshot of {task} in {self.root}"
            ) from None
        except (ValueError, TypeError) as exc:
            raise CheckpointError(f"{path} is unreadable: {exc}") from None

    def validate(self, checkpoint: int, tasks: Iterable[str], identity: str = "") -> list[str]:
        """What is wrong with stored checkpoint `checkpoint` (empty: intact and restorable).

        Every subtask in `tasks` must have a snapshot whose manifest lists files
        that all exist with their recorded size and checksum, and whose metadata
        parses, names this checkpoint and task, and (when `identity` is given)
        was taken by a job with that identity fingerprint.
        """
        chk = self.root / f"chk-{checkpoint}"
        if not chk.is_dir():
            return [f"{chk} is missing"]
        problems: list[str] = []
        for task in sorted(tasks):
            problems += self._validate_task(checkpoint, task, identity)
        return problems

    def _validate_task(self, checkpoint: int, task: str, identity: str) -> list[str]:
        target = self._dir(checkpoint, task)
        try:
            manifest = json.loads((target / MANIFEST).read_text())
            files = dict(manifest["files"])
        except FileNotFoundError:
            return [f"{target / MANIFEST} is missing (snapshot incomplete or not of this kstream)"]
        except (ValueError, TypeError, KeyError) as exc:
            return [f"{target / MANIFEST} is unreadable: {exc}"]
        for rel, entry in sorted(files.items()):
            path = target / rel
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                return [f"{path} is missing"]
            if size != entry.get("size"):
                return [f"{path} has {size} bytes, the manifest says {entry.get('size')}"]
            if "sha256" in entry and _sha256(path) != entry["sha256"]:
                return [f"{path} does not match its checksum"]
        if "meta.json" not in files:
            return [f"{target / MANIFEST} does not list meta.json"]
        try:
            meta = SnapshotMeta.from_json((target / "meta.json").read_text())
        except (ValueError, TypeError) as exc:
            return [f"{target / 'meta.json'} is unreadable: {exc}"]
        if meta.checkpoint != checkpoint or meta.task != task:
            return [f"{target / 'meta.json'} describes {meta.task} of checkpoint {meta.checkpoint}"]
        if identity and meta.identity != identity:
            return [f"{target} was taken by another job (identity {meta.identity or 'none'})"]
        return []

    def load_payload(self, checkpoint: int, task: str, name: str) -> Any:
        return self.load_payloads(checkpoint, task).get(name)

    def load_payloads(self, checkpoint: int, task: str) -> dict[str, Any]:
        """Every sink payload stored with the snapshot (name -> payload)."""
        found: dict[str, Any] = {}
        for path in sorted(self._dir(checkpoint, task).glob("sink-*.wal")):
            with path.open("rb") as f:
                if f.read(len(WAL_MAGIC)) != WAL_MAGIC:
                    raise CheckpointError(f"{path} is not a write-ahead file of this kstream")
                try:
                    stored, payload = marshal.load(f)
                except (EOFError, ValueError, TypeError) as exc:
                    raise CheckpointError(f"{path} is unreadable: {exc}") from None
            found[stored] = payload
        return found

    def write_file(self, rel: str, data: bytes) -> None:
        """Write `data` durably at `rel` under the root (a savepoint's description)."""
        path = self.root / rel
        tmp = path.with_name(path.name + ".tmp")
        try:
            with tmp.open("wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            tmp.rename(path)
        except OSError as exc:
            raise CheckpointError(storage_failure(exc, path)) from None

    def read_file(self, rel: str) -> bytes | None:
        """The bytes at `rel` under the root; None if there is no such file."""
        try:
            return (self.root / rel).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(storage_failure(exc, self.root / rel)) from None

    def fetch_db(self, checkpoint: int, task: str, target: Path) -> bool:
        src = self._dir(checkpoint, task) / "db"
        shutil.rmtree(target, ignore_errors=True)
        if not src.is_dir():
            return False
        target.parent.mkdir(parents=True, exist_ok=True)
        # RocksDB never writes a table file again once written (compaction writes
        # new ones and deletes the old), so those are linked, not copied: a
        # restore costs no copy of the state. Every other file (MANIFEST,
        # CURRENT, OPTIONS, logs) is written to, and copied.
        shutil.copytree(src, target, copy_function=_link_table_or_copy)
        return True

    def discard(self, checkpoint: int) -> None:
        shutil.rmtree(self.root / f"chk-{checkpoint}", ignore_errors=True)

    def close(self, timeout_s: float) -> None:
        """Nothing to finish: deletes are done when `discard` and `sweep` return."""

    def sweep(self, retained: Collection[int], below: int | None = None) -> list[int]:
        """Delete every stored checkpoint older than the newest of `retained` (or than
        `below`, if given) but not in it.

        What is left there can never be restored: parts of aborted checkpoints
        (some subtasks stored theirs, another declined, or stored after the
        abort), and checkpoints a start-up passed over as damaged. Returns the
        ids deleted.
        """
        if not retained:
            return []
        newest = max(retained) if below is None else below
        gone = [n for n in self.completed() if n < newest and n not in retained]
        for n in gone:
            self.discard(n)
        return gone

    def completed(self) -> list[int]:
        """Checkpoint ids that have a directory (complete or not)."""
        ids = []
        for d in self.root.glob("chk-*"):
            try:
                ids.append(int(d.name[4:]))
            except ValueError:
                continue
        return sorted(ids)
