"""A job's identity: what must not change between a checkpoint and the job resuming it.

A checkpoint's state and offsets only mean something to the job that took it:
the same sources (topics), operators, sinks and parallelism. `JobIdentity`
describes a planned job in plain JSON-able values (computed from a plan by
`kstream.dataflow.identity.identity_of`); it is recorded with every
completed checkpoint (in the control topic's ``complete`` message) and its
fingerprint in every snapshot's metadata. `resume_problems` compares a recorded
identity with the job being started and says what differs; the runner refuses
to resume when anything does, unless told to accept compatible changes.

A job with a max parallelism (`max_parallelism`, key format 3 state:
`kstream.protocol.key_groups`) may resume at another parallelism (rescaling);
another max parallelism is another job. A job resumed from a checkpoint of
key format 1 or 2 (recorded without a max parallelism) keeps its parallelism:
its keys were routed by ``crc32 % parallelism`` and its state is not split
by key group.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FORMAT_VERSION", "JobIdentity", "resume_problems"]

#: Version of the checkpoint format (snapshot layout, manifest, identity). A
#: checkpoint of another version is not resumed: its files may mean something else.
FORMAT_VERSION = 2


@dataclass(frozen=True, slots=True)
class JobIdentity:
    """The identity of a planned job: its sources, sinks, operators (side outputs
    included, as ``s<stage>.side:<tag>``) and parallelism per stage, and its
    `edges` when the graph is not a line.

    `edges` lists every stage input as ``s<from>>s<to>.i<k>:<keyed|round-robin>``
    (with ``/side<n>`` for a co-process's second side). It is empty for a line
    (each stage fed only by the stage before it), whose edges the other fields
    already imply: such a job keeps the fingerprint it had before graphs existed.
    """

    format: int
    parallelism: tuple[int, ...]
    sources: tuple[str, ...]
    sinks: tuple[str, ...]
    operators: tuple[str, ...]
    edges: tuple[str, ...] = ()
    #: The job's number of key groups; 0: not recorded (a checkpoint of key
    #: format 1 or 2, which cannot be rescaled).
    max_parallelism: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": self.format,
            "parallelism": list(self.parallelism),
            "sources": list(self.sources),
            "sinks": list(self.sinks),
            "operators": list(self.operators),
        }
        if self.edges:
            out["edges"] = list(self.edges)
        if self.max_parallelism:
            out["max_parallelism"] = self.max_parallelism
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> JobIdentity:
        """Parse a recorded identity; `ValueError` if it is malformed."""
        try:
            return cls(
                int(raw["format"]),
                tuple(int(x) for x in raw["parallelism"]),
                tuple(str(x) for x in raw["sources"]),
                tuple(str(x) for x in raw["sinks"]),
                tuple(str(x) for x in raw["operators"]),
                tuple(str(x) for x in raw.get("edges", ())),
                int(raw.get("max_parallelism", 0)),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed job identity {raw!r}") from exc

    @property
    def fingerprint(self) -> str:
        """A short digest of the identity, stored in every snapshot's metadata.

        With a max parallelism it leaves the parallelism out: a rescaled job's
        snapshots are of the same job. Without one it is what it always was.
        """
        form = self.to_json()
        if self.max_parallelism:
            del form["parallelism"]
        text = json.dumps(form, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def resume_problems(
    recorded: JobIdentity | None, current: JobIdentity
) -> tuple[list[str], list[str]]:
    """What differs between a checkpoint's job and the job resuming it.

    Returns ``(fatal, acceptable)``: `fatal` differences can never be resumed
    across (checkpoint format, max parallelism, no recorded identity, and the
    parallelism of a checkpoint without key groups); `acceptable`
    ones (sources, sinks, operators) may be resumed on purpose when the user
    knows the change is compatible. Both empty: the same job.
    """
    if recorded is None:
        return ["the checkpoint records no job identity (written by an older kstream)"], []
    fatal: list[str] = []
    acceptable: list[str] = []
    if recorded.format != current.format:
        fatal.append(f"checkpoint format {recorded.format}, this kstream writes {current.format}")
    if not recorded.max_parallelism:
        # Key format 1 or 2: routed by crc32 % parallelism, no key groups to split by.
        if recorded.parallelism != current.parallelism:
            fatal.append(
                f"parallelism per stage {list(recorded.parallelism)} -> "
                f"{list(current.parallelism)}: the checkpoint was taken by a kstream "
                "without key groups and cannot be rescaled; run with its parallelism, "
                "or start it fresh (--fresh)"
            )
    elif recorded.max_parallelism != current.max_parallelism:
        fatal.append(
            f"max parallelism {recorded.max_parallelism} -> {current.max_parallelism} "
            "(the number of key groups is fixed for the life of the state)"
        )
    for what, old, new in (
        ("sources", recorded.sources, current.sources),
        ("sinks", recorded.sinks, current.sinks),
        ("operators", recorded.operators, current.operators),
        ("edges", recorded.edges, current.edges),
    ):
        if old != new:
            acceptable.append(f"{what} {', '.join(old) or '-'} -> {', '.join(new) or '-'}")
    return fatal, acceptable
