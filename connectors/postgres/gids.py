"""Global ids of the PostgreSQL sink's prepared transactions, and what a recovery does with them.

A gid is ``kstream:<job>:<sink>:<subtask>:<epoch>:<generation>``: the *head*
(``kstream:<job>:<sink>:<subtask>``) scopes it to one sink subtask, the epoch is
the checkpoint id `pre_commit` named, and the generation keeps a zombie's gid
from ever equalling its successor's. Names may contain ``:``, so a gid is parsed
from the right (two decimal numbers) and its head compared whole.

Pure: no I/O, so the decisions are unit-tested (hypothesis) apart from PostgreSQL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from kstream.errors import ConfigurationError

__all__ = [
    "MAX_GID_BYTES",
    "Gid",
    "Resolution",
    "application_name",
    "check_head",
    "head",
    "resolve",
]

#: PostgreSQL's limit on a gid (GIDSIZE 200, with its terminating zero byte).
MAX_GID_BYTES = 199
#: Room the two numbers take at most: ":" + 20 digits, twice (64-bit values).
_NUMBERS_BYTES = 2 * 21
#: PostgreSQL truncates ``application_name`` to 63 bytes.
_APP_HASH_CHARS = 24


def head(job: str, sink: str, subtask: str) -> str:
    """The prefix naming one sink subtask, without the trailing ``:``."""
    return f"kstream:{job}:{sink}:{subtask}"


def check_head(h: str) -> None:
    """`ConfigurationError` (one line) if gids under head `h` could exceed PostgreSQL's limit."""
    size = len(h.encode())
    if size + _NUMBERS_BYTES > MAX_GID_BYTES:
        raise ConfigurationError(
            f"the PostgreSQL sink's transaction ids ({h!r}, {size} bytes, plus epoch and "
            f"generation) would exceed PostgreSQL's {MAX_GID_BYTES} bytes; shorten the job "
            "or table name"
        )


def application_name(h: str, generation: int) -> str:
    """The ``application_name`` of a writer's sessions: a digest of head `h` and the generation.

    A recovery finds (and terminates) older generations' sessions of its subtask by it.
    """
    return f"kstream-{digest(h)}-g{generation}"


def digest(h: str) -> str:
    """A short fixed-length digest of head `h` (fits ``application_name`` and the fence key)."""
    return hashlib.sha256(h.encode()).hexdigest()[:_APP_HASH_CHARS]


@dataclass(frozen=True, slots=True, order=True)
class Gid:
    """One parsed global id."""

    head: str
    epoch: int
    generation: int

    def __str__(self) -> str:
        return f"{self.head}:{self.epoch}:{self.generation}"

    @classmethod
    def parse(cls, text: str) -> Gid | None:
        """The gid `text` names, or None if it is not one of kstream's."""
        rest, sep1, generation = text.rpartition(":")
        h, sep2, epoch = rest.rpartition(":")
        if not (sep1 and sep2 and h.startswith("kstream:")):
            return None
        # ASCII digits only: int() also takes "٣", " 1" and "+1".
        if not all(n.isascii() and n.isdecimal() for n in (epoch, generation)):
            return None
        return cls(h, int(epoch), int(generation))


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a recovery does with the prepared transactions it found."""

    commit: tuple[str, ...]
    rollback: tuple[str, ...]


def resolve(prepared: Iterable[str], h: str, kept: Iterable[str]) -> Resolution:
    """Split the prepared gids of sink subtask `h` into those to commit and to roll back.

    `prepared`: every gid in ``pg_prepared_xacts`` (other subtasks' and other
    applications' are ignored). `kept`: the gids the restored checkpoint's
    snapshot of this subtask listed as prepared and not yet committed; their
    checkpoint completed, so they are committed. Every other gid of `h` was
    prepared after that checkpoint (by this job before its crash, or by a
    zombie) and is rolled back. A kept gid missing from `prepared` was
    committed already (a crash after the commit): nothing to do.
    """
    keep = set(kept)
    commit: list[str] = []
    rollback: list[str] = []
    for text in sorted(set(prepared)):
        gid = Gid.parse(text)
        if gid is None or gid.head != h:
            continue
        (commit if text in keep else rollback).append(text)
    return Resolution(tuple(commit), tuple(rollback))
