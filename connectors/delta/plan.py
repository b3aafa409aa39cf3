"""What the Delta Lake sink commits, and whether it may: pure decisions, no I/O.

Each sink subtask owns two application transactions (Delta ``txn`` actions) in
the table's log: `data_app_id` (version = the newest epoch committed) and
`generation_app_id` (version = the generation of the newest writer that
recovered). A pending epoch is a list of add actions (`PendingFile`) kept in the
checkpoint; `epochs_to_commit` says which of them a commit still has to add, and
`check_generation` whether this writer may commit at all.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kstream.errors import ProducerFencedError

__all__ = [
    "PendingEpoch",
    "PendingFile",
    "check_generation",
    "data_app_id",
    "epochs_to_commit",
    "file_name",
    "generation_app_id",
]


def data_app_id(job: str, sink: str, subtask: str) -> str:
    """The app_id whose version is the newest epoch of this subtask in the table."""
    return f"kstream:{job}:{sink}:{subtask}"


def generation_app_id(job: str, sink: str, subtask: str) -> str:
    """The app_id whose version is the generation allowed to commit for this subtask."""
    return f"{data_app_id(job, sink, subtask)}:generation"


def file_name(app_id: str, generation: int, epoch: int, nonce: str) -> str:
    """The Parquet file of one epoch: unique per writer and epoch (`nonce` per attempt),
    traceable to its subtask by a digest of `app_id`."""
    digest = hashlib.sha256(app_id.encode()).hexdigest()[:16]
    return f"part-kstream-{digest}-g{generation}-e{epoch}-{nonce}.parquet"


@dataclass(frozen=True, slots=True)
class PendingFile:
    """One written, uncommitted Parquet file: the fields of its Delta add action."""

    path: str
    size: int
    modification_time: int
    stats: str

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "mtime": self.modification_time,
            "stats": self.stats,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PendingFile:
        return cls(str(d["path"]), int(d["size"]), int(d["mtime"]), str(d["stats"]))


@dataclass(frozen=True, slots=True)
class PendingEpoch:
    """The files one epoch wrote, not yet committed."""

    epoch: int
    files: tuple[PendingFile, ...]

    def to_json(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "files": [f.to_json() for f in self.files]}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PendingEpoch:
        return cls(int(d["epoch"]), tuple(PendingFile.from_json(f) for f in d["files"]))


def epochs_to_commit(
    pending: Iterable[PendingEpoch], upto: int | None, committed: int | None
) -> tuple[PendingEpoch, ...]:
    """The pending epochs a commit up to epoch `upto` (None: all) must add, oldest first.

    `committed` is the table's version of the subtask's `data_app_id` (None: never
    committed). Epochs are committed in order, each commit recording its newest
    epoch, so every epoch at or below `committed` is in the table already (a
    replay after a crash between the Delta commit and the end of `commit`): it is
    skipped. Duplicate entries for one epoch count once.
    """
    chosen: dict[int, PendingEpoch] = {}
    for p in pending:
        if (upto is None or p.epoch <= upto) and (committed is None or p.epoch > committed):
            chosen.setdefault(p.epoch, p)
    return tuple(chosen[e] for e in sorted(chosen))


def check_generation(table_generation: int | None, mine: int, what: str) -> None:
    """`ProducerFencedError` unless a writer of generation `mine` may commit, given the
    generation the table's log names for its subtask (None: none yet)."""
    if table_generation is not None and table_generation > mine:
        raise ProducerFencedError(
            f"{what}: generation {table_generation} recovered this sink subtask, this "
            f"writer is generation {mine}: a newer process took over"
        )
