"""Where an operator's state is in a savepoint or a checkpoint: found on the driver.

The driver reads descriptions only (``savepoint.json``, a subtask's
``meta.json``): which subtasks hold the operator's state, its key groups and
its state serde. Each subtask's database is read, checked and decoded by a
task of its own (`kstream.tools.state.read`), which opens the storage again
with `open_snapshot_storage`.

Accepted locations: a savepoint (``file:///dir``, ``/dir``, ``s3://bucket/prefix``)
and a checkpoint of a job's storage (``.../<job>/checkpoints/chk-<n>`` or
``s3://bucket/prefix/<job>/chk-<n>``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kstream.errors import CheckpointError, CheckpointStorageError, ConfigurationError
from kstream.runtime.checkpoint.objects import ObjectCheckpointStorage, s3_client
from kstream.runtime.checkpoint.savepoint import DESCRIPTION, open_savepoint
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage, ManagedCheckpointStorage
from kstream.runtime.checkpoint.url import StorageURL, parse_storage_url
from kstream.runtime.state.store import KEY_FORMAT, UNGROUPED_KEY_FORMAT

__all__ = [
    "StateSource",
    "locate",
    "normal_url",
    "open_snapshot_storage",
    "resolve_operator",
    "stage_of",
]

_CHECKPOINT = re.compile(r"chk-(\d+)")
_QUALIFIED = re.compile(r"s(\d+)\.(.+)")


@dataclass(frozen=True, slots=True)
class StateSource:
    """One operator's state in one snapshot: what every read task is given.

    `url`: the savepoint, or the checkpoint storage's root (`savepoint` False);
    `op`: the state name ``s<stage>.<uid>``; `tasks`: the subtasks of its stage.
    """

    url: str
    savepoint: bool
    checkpoint: int
    op: str
    tasks: tuple[str, ...]
    max_parallelism: int
    state_serde: str
    s3_endpoint_url: str = ""


def normal_url(text: str) -> str:
    if "://" in text:
        return text.rstrip("/")
    return f"file://{os.path.abspath(text)}"


def open_snapshot_storage(source: StateSource) -> ManagedCheckpointStorage:
    """The storage `source` names, opened for reading (on the driver or in a task)."""
    if source.savepoint:
        storage, _ = open_savepoint(
            source.url, s3_endpoint_url=source.s3_endpoint_url, validate=False
        )
        return storage
    return _checkpoint_storage(parse_storage_url(source.url), source.s3_endpoint_url)


def _checkpoint_storage(root: StorageURL, endpoint: str) -> ManagedCheckpointStorage:
    if root.scheme == "file":
        if not Path(root.path).is_dir():
            raise CheckpointError(f"{root} does not exist")
        return LocalCheckpointStorage(Path(root.path))
    parent, _, job = root.path.rpartition("/")
    return ObjectCheckpointStorage(
        StorageURL("s3", parent, root.bucket), job, s3_client(endpoint or None)
    )


def stage_of(op: str) -> int:
    m = _QUALIFIED.fullmatch(op)
    assert m is not None
    return int(m.group(1))


def resolve_operator(operator: str, known: tuple[str, ...], where: str) -> str:
    """The state name (``s<stage>.<uid>``) of `operator` (a uid, or already qualified)."""
    if operator in known:
        return operator
    matches = [s for s in known if (m := _QUALIFIED.fullmatch(s)) and m.group(2) == operator]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(
        f"{m.group(2)} (stage {m.group(1)})" for s in known if (m := _QUALIFIED.fullmatch(s))
    )
    if len(matches) > 1:
        raise ConfigurationError(
            f"operator uid {operator!r} is in several stages of {where}: name one of "
            f"{', '.join(matches)}"
        )
    raise ConfigurationError(
        f"operator uid {operator!r} has no state in {where}; known: {listed or 'none'}"
    )


def locate(text: str, operator: str, *, s3_endpoint_url: str = "") -> StateSource:
    """Find operator `operator`'s state in the savepoint or checkpoint at `text`.

    One line (`CheckpointError`, `ConfigurationError`) for a location that is not
    a kstream snapshot, a savepoint of a newer format, a snapshot of an older key
    format this reader does not decode, and an operator uid without state there
    (the known ones listed).
    """
    url = normal_url(text)
    try:
        parsed = parse_storage_url(url)
    except CheckpointStorageError as exc:
        raise CheckpointStorageError(str(exc).replace("--checkpoint-storage", "state of")) from None
    head, _, last = parsed.path.rpartition("/")
    m = _CHECKPOINT.fullmatch(last)
    if m is not None:
        return _locate_checkpoint(parsed, head, int(m.group(1)), operator, s3_endpoint_url)
    try:
        _, info = open_savepoint(url, s3_endpoint_url=s3_endpoint_url, validate=False)
    except CheckpointError as exc:
        if (DESCRIPTION in str(exc) and "missing" in str(exc)) or "does not exist" in str(exc):
            raise CheckpointError(
                f"{text} is not a kstream savepoint ({DESCRIPTION} is missing) nor a "
                "checkpoint (.../chk-<n>)"
            ) from None
        raise
    if info.max_parallelism == 0:
        raise CheckpointError(
            f"savepoint {url} has keys without key groups (key format "
            f"{UNGROUPED_KEY_FORMAT} or older): start it and take a new savepoint to read it"
        )
    op = resolve_operator(operator, info.states, f"savepoint {url}")
    stage = stage_of(op)
    tasks = tuple(f"s{stage}-{i}" for i in range(info.parallelism[stage]))
    return StateSource(
        url, True, info.checkpoint, op, tasks, info.max_parallelism, info.state_serde,
        s3_endpoint_url,
    )  # fmt: skip


def _locate_checkpoint(
    parsed: StorageURL, head: str, n: int, operator: str, endpoint: str
) -> StateSource:
    where = f"checkpoint {parsed}"
    if _QUALIFIED.fullmatch(operator) is None:
        raise ConfigurationError(
            f"a checkpoint does not record its operators' uids: name the state as "
            f"s<stage>.<uid> (e.g. s1.{operator}), or read a savepoint"
        )
    root = StorageURL(parsed.scheme, head, parsed.bucket)
    storage = _checkpoint_storage(root, endpoint)
    stage = stage_of(operator)
    try:
        meta = storage.load(n, f"s{stage}-0")
    except CheckpointError as exc:
        raise CheckpointError(f"{where} holds no snapshot of stage {stage}: {exc}") from None
    if meta.key_format != KEY_FORMAT or not meta.max_parallelism:
        raise CheckpointError(
            f"{where} has keys of key format {meta.key_format}; this reader decodes "
            f"format {KEY_FORMAT} (key groups): take a savepoint of the running job"
        )
    tasks = tuple(f"s{stage}-{i}" for i in range(meta.parallelism))
    return StateSource(
        str(root), False, n, operator, tasks, meta.max_parallelism, meta.state_serde, endpoint
    )
