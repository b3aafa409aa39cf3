"""The suite's workloads: generated input, the exact expected output, and its check.

Pure logic, no I/O: every contender implements the same two jobs and the
suite checks each contender's output against what the input implies.

- ``wordcount``: for every word occurrence (``line.split()``), emit key = the
  word, value = its running count as decimal text. Per word the values must be
  exactly 1, 2, ..., N (N = its occurrences), each once.
- ``mapfilter``: stateless; for every word whose last character is not an odd
  digit, emit key = the word, value = the word upper-cased. Per word the
  output must hold exactly N such values and no other value.

The plain loop has no state, so for the word count it emits value ``1`` per
occurrence (the suite checks N ones per word): it is the practical limit, not a
word count.
"""

from __future__ import annotations

import random
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Workload = Literal["wordcount", "mapfilter"]
WORKLOADS: tuple[Workload, ...] = ("wordcount", "mapfilter")

#: Words whose last character is one of these are dropped by `mapfilter` (about half the
#: generated words): the same rule in every contender, Java included.
DROPPED_LAST_CHARS = "13579"


def keep(word: str) -> bool:
    """The `mapfilter` predicate."""
    return word[-1] not in DROPPED_LAST_CHARS


def generate(words: int, seed: int) -> list[str]:
    """Text lines holding `words` words in total, the same for the same arguments.

    A Zipf-like vocabulary (a few hot words, a long tail) as in real text, 4-12
    words per line (the last line may be shorter).
    """
    rnd = random.Random(seed)
    vocab = [f"w{i:04d}" for i in range(2000)] + ["the", "a", "kafka", "stream", "snapshot"]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    lines: list[str] = []
    left = words
    while left > 0:
        k = min(left, rnd.randint(4, 12))
        lines.append(" ".join(rnd.choices(vocab, weights, k=k)))
        left -= k
    return lines


@dataclass(frozen=True)
class Expected:
    """What a correct contender writes for one workload: outputs per key (the word)."""

    workload: Workload
    #: True for the plain loop's word count: value ``1`` per occurrence instead of a count.
    ones: bool
    per_key: dict[bytes, int]

    @property
    def total(self) -> int:
        """Number of output records expected."""
        return sum(self.per_key.values())


def expected(lines: Iterable[str], workload: Workload, *, ones: bool = False) -> Expected:
    """The exact output the workload implies for `lines`."""
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(line.split())
    if workload == "mapfilter":
        counts = Counter({w: n for w, n in counts.items() if keep(w)})
    return Expected(workload, ones, {w.encode(): n for w, n in counts.items()})


@dataclass
class Tally:
    """What a read_committed reader has seen so far of one contender's output.

    `add` is called once per record, so it does as little as possible; `problems`
    does the full check once every expected record has arrived.
    """

    expect: Expected
    received: int = 0
    #: wordcount: the values seen per key, in arrival order.
    values: dict[bytes, array[int]] = field(default_factory=dict)
    #: mapfilter: records per key; values that are not the key upper-cased.
    counts: Counter[bytes] = field(default_factory=Counter)
    wrong_values: int = 0
    unexpected_keys: set[bytes] = field(default_factory=set)

    def add(self, key: bytes | None, value: bytes | None) -> None:
        """Account for one output record."""
        self.received += 1
        k = key or b""
        if k not in self.expect.per_key:
            self.unexpected_keys.add(k)
            return
        if self.expect.workload == "mapfilter":
            self.counts[k] += 1
            if value != k.upper():
                self.wrong_values += 1
            return
        try:
            n = int(value or b"")
        except ValueError:
            n = 0
        seen = self.values.get(k)
        if seen is None:
            seen = self.values[k] = array("I")
        seen.append(max(n, 0))

    @property
    def complete(self) -> bool:
        """True once at least as many records as expected have arrived."""
        return self.received >= self.expect.total

    def problems(self, limit: int = 5) -> list[str]:
        """Up to `limit` one-line descriptions of how the output differs; [] if exact."""
        out: list[str] = []
        if self.unexpected_keys:
            some = sorted(self.unexpected_keys)[:3]
            out.append(f"{len(self.unexpected_keys)} unexpected keys, e.g. {some}")
        if self.wrong_values:
            out.append(f"{self.wrong_values} records whose value is not the key upper-cased")
        for key, n in sorted(self.expect.per_key.items()):
            if len(out) >= limit:
                break
            if self.expect.workload == "mapfilter":
                got = self.counts.get(key, 0)
                if got != n:
                    out.append(f"{key.decode()}: {got} outputs, expected {n}")
                continue
            values = self.values.get(key, array("I"))
            want = [1] * n if self.expect.ones else list(range(1, n + 1))
            if sorted(values) != want:
                out.append(_describe(key, list(values), n, self.expect.ones))
        return out[:limit]


def _describe(key: bytes, values: list[int], n: int, ones: bool) -> str:
    """One line on how one word's outputs differ from 1..n (or n ones)."""
    word = key.decode()
    if ones:
        return f"{word}: {len(values)} outputs ({sum(values)} total), expected {n} ones"
    dup = len(values) - len(set(values))
    missing = n - len(set(values) & set(range(1, n + 1)))
    return f"{word}: {len(values)} outputs, expected 1..{n} ({missing} missing, {dup} repeated)"
