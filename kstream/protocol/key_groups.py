"""Key groups: how keys are spread over subtasks so that state can be rescaled.

A job has a **max parallelism** `K` (`Job(max_parallelism=...)`): the number of
key groups. A key whose canonical bytes are `kb` belongs to key group
``crc32(kb) % K``, for the life of the job's state. Subtask `i` of a stage of
parallelism `P` (``1 <= P <= K``) owns the contiguous range of groups
``[ceil(i*K/P), ceil((i+1)*K/P))``, so group `g` is owned by ``g*P // K``
(Flink's rule). Because every state key starts with its key group
(`kstream.runtime.state.store`, key format 3), a range of groups is one
contiguous scan of a subtask's database, and a restore at another parallelism
(`restore_plan`) reads, for each new subtask, only the old subtasks whose
ranges overlap its own.

Pure arithmetic on ints, no I/O: tested on lists (tests/unit/protocol).
"""

from __future__ import annotations

import zlib
from functools import lru_cache

__all__ = [
    "DEFAULT_MAX_PARALLELISM",
    "MAX_PARALLELISM_LIMIT",
    "group_of",
    "group_prefixes",
    "group_range",
    "overlapping",
    "owner",
    "owner_table",
    "restore_plan",
]

#: `Job(max_parallelism=...)`'s default: room to grow to 128 subtasks per stage.
DEFAULT_MAX_PARALLELISM = 128
#: Key groups are two big-endian bytes at the start of every state key.
MAX_PARALLELISM_LIMIT = 32_768


def group_of(key: bytes, max_parallelism: int) -> int:
    """The key group of a key whose canonical bytes are `key`."""
    return zlib.crc32(key) % max_parallelism


def owner(group: int, max_parallelism: int, parallelism: int) -> int:
    """The subtask (of `parallelism`) that owns key group `group` (of `max_parallelism`)."""
    return group * parallelism // max_parallelism


def group_range(index: int, max_parallelism: int, parallelism: int) -> range:
    """The key groups subtask `index` of `parallelism` owns: a contiguous range,
    ``[ceil(index*K/P), ceil((index+1)*K/P))``; never empty when ``P <= K``."""
    k, p = max_parallelism, parallelism
    return range(-(-index * k // p), -(-(index + 1) * k // p))


@lru_cache(maxsize=64)
def owner_table(max_parallelism: int, parallelism: int) -> tuple[int, ...]:
    """`owner` of every key group, by group: routing is then a crc32, a modulo and
    an index (the per-record path of `kstream.runtime.channels.writer`)."""
    return tuple(owner(g, max_parallelism, parallelism) for g in range(max_parallelism))


@lru_cache(maxsize=16)
def group_prefixes(max_parallelism: int) -> tuple[bytes, ...]:
    """Every key group's two big-endian bytes, by group: the first bytes of its
    state keys (built once, so a record's prefix is an index, not an encoding)."""
    return tuple(g.to_bytes(2, "big") for g in range(max_parallelism))


def overlapping(index: int, max_parallelism: int, new: int, old: int) -> list[int]:
    """The subtasks of the old parallelism `old` whose key groups overlap those of
    subtask `index` of the new parallelism `new`, in order."""
    groups = group_range(index, max_parallelism, new)
    if not groups:
        return []
    first = owner(groups.start, max_parallelism, old)
    last = owner(groups.stop - 1, max_parallelism, old)
    return list(range(first, last + 1))


def restore_plan(max_parallelism: int, old: int, new: int) -> list[list[tuple[int, range]]]:
    """For each new subtask, the old subtasks it reads and the key groups it takes
    from each: ``plan[i] == [(j, groups), ...]`` with the groups of old subtask `j`
    that new subtask `i` owns (never empty)."""
    out: list[list[tuple[int, range]]] = []
    for i in range(new):
        mine = group_range(i, max_parallelism, new)
        reads = []
        for j in overlapping(i, max_parallelism, new, old):
            theirs = group_range(j, max_parallelism, old)
            both = range(max(mine.start, theirs.start), min(mine.stop, theirs.stop))
            if both:
                reads.append((j, both))
        out.append(reads)
    return out
