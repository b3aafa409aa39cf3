"""The suite's workloads: generated input, the exact expected output, and its check.

Pure logic, no I/O: every contender implements the same three jobs and the
suite checks each contender's output against what the input implies.

- ``wordcount``: for every word occurrence (``line.split()``), emit key = the
  word, value = its running count as decimal text. Per word the values must be
  exactly 1, 2, ..., N (N = its occurrences), each once.
- ``mapfilter``: stateless; for every word whose last character is not an odd
  digit, emit key = the word, value = the word upper-cased. Per word the
  output must hold exactly N such values and no other value.
- ``windowed``: tumbling event-time windows of `EventTime.window_ms` per word;
  once a window has closed, emit key = the word, value = ``"<window start ms>
  <count>"`` in decimal text, once (final results only: no early or updated
  results). Per word the output must hold exactly its windows that have a
  word in them, each once, with the right count.

**Event time of `windowed`** (`EventTime`): line i of the input has the Kafka
record timestamp ``t0 + i * LINE_MS`` (every word of a line shares it) and is
written to partition ``i % partitions``, so timestamps rise in every partition
and every partition advances through time at the same pace. Windows are
``[t0 + k·window_ms, t0 + (k+1)·window_ms)`` (`t0` is a multiple of the size,
so they are also aligned to the epoch, as every contender aligns them).

**How the last windows close** (the same rule for every contender): after its
data each partition gets one flush line (`flush_line`: every distinct word of
the data once, so every key and every partition of a repartition topic sees
it) with the timestamp `EventTime.flush_ms`, far enough ahead to close every
window of the data and none of its own. The expected output is every
(word, window) of the data lines; no window of the flush lines ever closes, so
flush words must not appear in the output.

**Nothing is late, and why.** kstream and the hand-written loops keep one
watermark per input partition and take the minimum (kstream with
out-of-orderness 0 and allowed lateness 0: timestamps rise per partition, and a
record is judged against its own partition): no record is late whatever the
interleaving, and windows close as the watermark passes their end. Quix
Streams and Kafka Streams judge lateness against *stream time*, the largest
timestamp seen in one partition of their repartition topic, where the words
of every input partition meet in the order their upstream tasks wrote them,
which depends on scheduling. They run with a grace of `EventTime.grace_ms`
(longer than the data's span, so no data record can be late), and their flush
lines are appended only once their consumer group has committed every data
line's offset: a flush read from one input partition before the data of
another would otherwise drop that data as late. Their windows therefore close
only at the end; the output they must write is the same.

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

Workload = Literal["wordcount", "mapfilter", "windowed"]
WORKLOADS: tuple[Workload, ...] = ("wordcount", "mapfilter", "windowed")

#: Event time between consecutive input lines of `windowed` (about 8 words a line).
LINE_MS = 1
#: Default window of `windowed`: about 80,000 words, so most of the vocabulary is in
#: every window and the output is a few percent of the input.
WINDOW_MS = 10_000
#: `default_t0` puts the flush this far before the clock: Kafka checks record
#: timestamps against the broker's clock, and its time retention deletes old ones.
FLUSH_BEFORE_NOW_MS = 3_600_000

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
class EventTime:
    """The event time of `windowed`'s input and the windows it closes (module docstring)."""

    #: Timestamp (ms) of the first line: a multiple of `window_ms`.
    t0: int
    #: Number of data lines (the flush lines come after them).
    lines: int
    window_ms: int = WINDOW_MS

    def __post_init__(self) -> None:
        if self.window_ms <= 0 or self.t0 % self.window_ms or self.lines < 0:
            raise ValueError(f"t0 must be a multiple of window_ms > 0, lines >= 0: {self}")

    def timestamp(self, line: int) -> int:
        """The timestamp of data line `line` (0-based)."""
        return self.t0 + line * LINE_MS

    def window_start(self, timestamp: int) -> int:
        return timestamp - timestamp % self.window_ms

    @property
    def last_end(self) -> int:
        """The end of the last window holding data."""
        return self.window_start(self.timestamp(max(self.lines - 1, 0))) + self.window_ms

    @property
    def grace_ms(self) -> int:
        """Grace for contenders with stream time: a data record, at or after `t0`, is in a
        window ending after ``t0`` and stream time never passes the last data timestamp
        before the flush, so none is ever late."""
        return self.last_end - self.t0

    @property
    def flush_ms(self) -> int:
        """Timestamp of the flush lines: closes every data window even after `grace_ms`;
        its own window starts after all of them and never closes."""
        return self.last_end + self.grace_ms


def default_t0(lines: int, now_ms: int, window_ms: int = WINDOW_MS) -> int:
    """A `t0` whose flush is about an hour before `now_ms` (see `FLUSH_BEFORE_NOW_MS`)."""
    span = EventTime(0, lines, window_ms).flush_ms
    t0 = now_ms - FLUSH_BEFORE_NOW_MS - span
    return t0 - t0 % window_ms


def flush_line(lines: Iterable[str]) -> str:
    """The flush line: every distinct word of `lines` once, sorted."""
    return " ".join(sorted({w for line in lines for w in line.split()}))


def window_counts(lines: Iterable[str], timing: EventTime) -> Counter[tuple[str, int]]:
    """Count per (word, window start) of the data lines."""
    counts: Counter[tuple[str, int]] = Counter()
    for i, line in enumerate(lines):
        start = timing.window_start(timing.timestamp(i))
        counts.update((w, start) for w in line.split())
    return counts


def window_value(start: int, count: int) -> bytes:
    """The output value of one closed window."""
    return f"{start} {count}".encode()


@dataclass(frozen=True)
class Expected:
    """What a correct contender writes for one workload: outputs per key (the word)."""

    workload: Workload
    #: True for the plain loop's word count: value ``1`` per occurrence instead of a count.
    ones: bool
    per_key: dict[bytes, int]
    #: windowed: per word, its count per window start.
    windows: dict[bytes, dict[int, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Number of output records expected."""
        return sum(self.per_key.values())


def expected(
    lines: Iterable[str],
    workload: Workload,
    *,
    ones: bool = False,
    timing: EventTime | None = None,
) -> Expected:
    """The exact output the workload implies for `lines` (`windowed` needs their `timing`)."""
    if workload == "windowed":
        if timing is None:
            raise ValueError("the windowed workload needs the input's EventTime")
        windows: dict[bytes, dict[int, int]] = {}
        for (word, start), n in window_counts(lines, timing).items():
            windows.setdefault(word.encode(), {})[start] = n
        per_key = {w: len(starts) for w, starts in windows.items()}
        return Expected(workload, False, per_key, windows)
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
    #: windowed: (window start, count) per key, in arrival order.
    windows: dict[bytes, list[tuple[int, int]]] = field(default_factory=dict)

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
        if self.expect.workload == "windowed":
            try:
                start, count = map(int, (value or b"").split(b" "))
            except ValueError:
                self.wrong_values += 1
                return
            self.windows.setdefault(k, []).append((start, count))
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
            form = (
                '"<window start> <count>"'
                if self.expect.workload == "windowed"
                else "the key upper-cased"
            )
            out.append(f"{self.wrong_values} records whose value is not {form}")
        for key, n in sorted(self.expect.per_key.items()):
            if len(out) >= limit:
                break
            if self.expect.workload == "mapfilter":
                got = self.counts.get(key, 0)
                if got != n:
                    out.append(f"{key.decode()}: {got} outputs, expected {n}")
                continue
            if self.expect.workload == "windowed":
                seen = sorted(self.windows.get(key, []))
                if seen != sorted(self.expect.windows[key].items()):
                    out.append(_describe_windows(key, seen, self.expect.windows[key]))
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


def _describe_windows(key: bytes, seen: list[tuple[int, int]], want: dict[int, int]) -> str:
    """One line on how one word's window results differ from the expected ones."""
    starts = [s for s, _ in seen]
    repeated = len(starts) - len(set(starts))
    missing = len(want.keys() - set(starts))
    extra = len(set(starts) - want.keys())
    wrong = sum(1 for s, n in set(seen) if s in want and want[s] != n)
    return (
        f"{key.decode()}: {len(seen)} window results, expected {len(want)} "
        f"({missing} missing, {extra} unexpected, {repeated} repeated, {wrong} wrong counts)"
    )
