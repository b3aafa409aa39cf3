"""Inputs and outputs of a running word count, and faults to inject into them.

Shared by the audit tests; nothing here talks to Kafka.
"""

from __future__ import annotations

import random
import zlib
from collections import Counter
from collections.abc import Sequence

#: Separators the audit must treat exactly as Python's str.split() does.
ODD_WHITESPACE = ["\t", "  ", "\u00a0", "\u3000", "\x1c", "\x85", "\u2028", "\u2003", "\n", "\r\n"]
#: Characters that look like separators to someone, but are not for str.split().
NOT_WHITESPACE = ["\u200b", "\ufeff", "\u180e", "-", ","]


def running_counts(lines: Sequence[str]) -> list[tuple[bytes, bytes]]:
    """The correct output of the word count for `lines`, in processing order."""
    counts: Counter[str] = Counter()
    out = []
    for line in lines:
        for word in line.split():
            counts[word] += 1
            out.append((word.encode(), str(counts[word]).encode()))
    return out


def text_lines(seed: int, n: int, vocabulary: Sequence[str]) -> list[str]:
    """`n` lines of words from `vocabulary`, joined by a mix of odd separators."""
    rng = random.Random(seed)
    glue = [" ", *ODD_WHITESPACE]
    lines = []
    for _ in range(n):
        words = [rng.choice(vocabulary) for _ in range(rng.randint(0, 8))]
        line = rng.choice(["", " ", "\t"])
        for w in words:
            line += w + rng.choice(glue)
        lines.append(line)
    return lines


def partition_of(key: bytes, partitions: int) -> int:
    """A fixed key -> partition mapping, so tests know where each record lands."""
    return zlib.crc32(key) % partitions


def by_partition(
    records: Sequence[tuple[bytes, bytes]], partitions: int
) -> dict[int, list[tuple[bytes, bytes]]]:
    """Group records by `partition_of` their key, keeping their order."""
    out: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(partitions)}
    for key, value in records:
        out[partition_of(key, partitions)].append((key, value))
    return out
