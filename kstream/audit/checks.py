"""What the audit checks, defined exactly, as pure functions over plain records.

These functions are the reference definition of every figure the audit reports;
`kstream.audit.spark_checks` computes the same figures with Spark for topics of
any size, and the test suite checks on random data that both agree.

Every output record falls in exactly one class:

* **unexpected**: it cannot be the output of any input record (see each check);
* **duplicate**: it repeats what an earlier output already said, where earlier
  means lower (partition, offset) in the output topic;
* **out of order** (running-count only): a first occurrence whose value is lower
  than the value of an earlier output for the same key in the same partition;
* otherwise it is correct.

so ``outputs == expected - lost + duplicates + unexpected`` always holds, and an
audit is clean when duplicates, lost, unexpected and out-of-order are all zero.

Only committed records ever reach these functions (the topics are read with
``read_committed``); offsets that no record occupies (transaction markers,
aborted records) are never a loss.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from kstream.errors import ConfigurationError
from kstream.protocol.names import (
    LINEAGE_HEADERS,
    LINEAGE_OFFSET_HEADER,
    LINEAGE_PARTITION_HEADER,
    LINEAGE_TOPIC_HEADER,
)

__all__ = [
    "EXAMPLE_LIMIT",
    "KEY_LIMIT",
    "LINEAGE_HEADERS",
    "LINEAGE_OFFSET_HEADER",
    "LINEAGE_PARTITION_HEADER",
    "LINEAGE_TOPIC_HEADER",
    "Check",
    "CheckResult",
    "KeyFigures",
    "OffsetBin",
    "PartitionStats",
    "Record",
    "Violation",
    "ViolationKind",
    "expected_output",
    "lineage",
    "load_expected",
    "partition_stats",
    "running_count",
    "running_count_violations",
    "word_separator_regex",
    "word_separators",
    "words",
]


#: The report lists at most this many example violations: enough to start debugging.
EXAMPLE_LIMIT = 20
#: The report's per-key breakdown keeps the keys with the most violations, at most this many.
KEY_LIMIT = 20
#: Values are cut to this many characters in examples: a report must stay readable.
VALUE_CHARS = 100

# A running count as the word count writes it: `str(n)` for n >= 1. At most 18 digits
# so that it fits a signed 64-bit integer in Spark as well.
_COUNT = re.compile(r"[1-9][0-9]{0,17}")
# An offset or partition as the lineage headers carry it: `str(n)` for n >= 0.
_POSITION = re.compile(r"0|[1-9][0-9]{0,17}")


class Check(StrEnum):
    """The checks `kstream audit --check` offers."""

    RUNNING_COUNT = "running-count"
    LINEAGE = "lineage"
    EXPECTED = "expected"


class ViolationKind(StrEnum):
    DUPLICATE = "duplicate"
    LOST = "lost"
    UNEXPECTED = "unexpected"
    OUT_OF_ORDER = "out_of_order"


@dataclass(frozen=True, slots=True)
class Record:
    """One committed record of a topic, as the checks see it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True, slots=True)
class Violation:
    """One violation, located as precisely as the check allows.

    `topic`/`partition`/`offset` name the offending output record; for a loss they
    name the input record that has no output (lineage), or only the output topic
    with no position (running-count: a missing count is not at any offset).
    `key` and `value` are the record's key and value as text (a lost count's
    missing value for running-count); `source` is the lineage ``topic/partition/offset``
    an output claims, when it carries all three headers.
    """

    kind: ViolationKind
    topic: str
    partition: int | None
    offset: int | None
    key: str | None
    value: str | None
    source: str | None = None

    def sort_key(self) -> tuple[object, ...]:
        """The order examples are chosen in: kind, topic, partition, offset, key, value.

        Missing fields sort first, as Spark's ascending order does.
        """
        return (
            self.kind.value,
            self.topic,
            *_nulls_first(self.partition, 0),
            *_nulls_first(self.offset, 0),
            *_nulls_first(self.key, ""),
            *_nulls_first(self.value, ""),
            *_nulls_first(self.source, ""),
        )


@dataclass(frozen=True, slots=True)
class KeyFigures:
    """Violations attributed to one key (the output key; for a lineage loss, the input key)."""

    key: str | None
    duplicates: int = 0
    lost: int = 0
    unexpected: int = 0
    out_of_order: int = 0

    @property
    def total(self) -> int:
        return self.duplicates + self.lost + self.unexpected + self.out_of_order


@dataclass(frozen=True, slots=True)
class OffsetBin:
    """`count` violations of `kind` at offsets ``start <= offset < start + width``."""

    kind: ViolationKind
    topic: str
    partition: int
    start: int
    count: int


@dataclass(frozen=True, slots=True)
class PartitionStats:
    """One partition of an audited topic, over the fixed offset range ``[start, end)``.

    `end` is the last stable offset when the audit began; `gaps` counts offsets in
    the range that hold no committed record: transaction markers, aborted records,
    compacted or deleted records. Gaps are never counted as losses.
    """

    topic: str
    partition: int
    start: int
    end: int
    records: int
    first_offset: int | None
    last_offset: int | None

    @property
    def gaps(self) -> int:
        return self.end - self.start - self.records


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The figures of one check; `expected` is what a perfect output would contain.

    For running-count `expected` is the number of words in the input (Σ N_w); for
    lineage it is the number of committed input records; for expected, the
    number of records the reference lists. `out_of_order` is None
    for checks that define no order.
    """

    check: Check
    expected: int
    outputs: int
    duplicates: int
    lost: int
    unexpected: int
    out_of_order: int | None
    examples: tuple[Violation, ...] = ()
    by_key: tuple[KeyFigures, ...] = ()
    by_offset: tuple[OffsetBin, ...] = field(default=())

    @property
    def violations(self) -> int:
        return self.duplicates + self.lost + self.unexpected + (self.out_of_order or 0)

    @property
    def clean(self) -> bool:
        return self.violations == 0


# -- words ------------------------------------------------------------------


@functools.cache
def word_separators() -> tuple[str, ...]:
    """Every code point on which Python's ``str.split()`` splits, by that very definition.

    Computed, not listed, so the Spark regex cannot drift from Python's notion of
    whitespace (it includes ``\\x1c``-``\\x1f``, ``\\x85``, ``\\u00a0``, ``\\u3000``...).
    """
    return tuple(c for c in map(chr, range(sys.maxunicode + 1)) if len(f"a{c}a".split()) == 2)


def word_separator_regex() -> str:
    """A Java regex matching one run of `word_separators`, for Spark's ``split``."""
    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in word_separators()) + "]+"


def words(value: bytes | None) -> list[str]:
    """The words of one input line: ``line.split()`` of the UTF-8 text (invalid bytes replaced)."""
    if value is None:
        return []
    return value.decode("utf-8", "replace").split()


# -- helpers shared by both checks --------------------------------------------


def _nulls_first(value: object, default: object) -> tuple[bool, object]:
    return (value is not None, default if value is None else value)


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


def _short(raw: bytes | None) -> str | None:
    text = _text(raw)
    return None if text is None else text[:VALUE_CHARS]


def _first_header(record: Record, name: str) -> bytes | None:
    for key, value in record.headers:
        if key == name:
            return value
    return None


def _in_order(outputs: Iterable[Record]) -> list[Record]:
    return sorted(outputs, key=lambda r: (r.partition, r.offset))


def _examples(violations: Iterable[Violation]) -> tuple[Violation, ...]:
    return tuple(sorted(violations, key=Violation.sort_key)[:EXAMPLE_LIMIT])


def _top_keys(per_key: dict[str | None, Counter[ViolationKind]]) -> tuple[KeyFigures, ...]:
    figures = [
        KeyFigures(
            key,
            duplicates=c[ViolationKind.DUPLICATE],
            lost=c[ViolationKind.LOST],
            unexpected=c[ViolationKind.UNEXPECTED],
            out_of_order=c[ViolationKind.OUT_OF_ORDER],
        )
        for key, c in per_key.items()
    ]
    figures = [f for f in figures if f.total]
    figures.sort(key=lambda f: (-f.total, *_nulls_first(f.key, "")))
    return tuple(figures[:KEY_LIMIT])


def _offset_bins(violations: Iterable[Violation], width: int) -> tuple[OffsetBin, ...]:
    counts: Counter[tuple[ViolationKind, str, int, int]] = Counter()
    for v in violations:
        if v.partition is not None and v.offset is not None:
            counts[(v.kind, v.topic, v.partition, v.offset // width * width)] += 1
    return tuple(
        OffsetBin(kind, topic, partition, start, n)
        for (kind, topic, partition, start), n in sorted(counts.items())
    )


def _result(
    check: Check,
    expected: int,
    outputs: int,
    violations: list[Violation],
    bin_width: int,
) -> CheckResult:
    per_key: dict[str | None, Counter[ViolationKind]] = defaultdict(Counter)
    for v in violations:
        per_key[v.key][v.kind] += 1
    kinds = Counter(v.kind for v in violations)
    return CheckResult(
        check=check,
        expected=expected,
        outputs=outputs,
        duplicates=kinds[ViolationKind.DUPLICATE],
        lost=kinds[ViolationKind.LOST],
        unexpected=kinds[ViolationKind.UNEXPECTED],
        out_of_order=kinds[ViolationKind.OUT_OF_ORDER] if check is Check.RUNNING_COUNT else None,
        examples=_examples(violations),
        by_key=_top_keys(per_key),
        by_offset=_offset_bins(violations, bin_width),
    )


# -- the checks ---------------------------------------------------------------


def running_count(
    inputs: Iterable[Record],
    outputs: Sequence[Record],
    *,
    input_topic: str,
    output_topic: str,
    bin_width: int = 1,
) -> CheckResult:
    """Check a running word count: each word's outputs must be exactly 1..N_w, in order.

    Words are ``line.split()`` of each input value (`words`); N_w is the number of
    occurrences of word w in the whole input. An output's key is the word (UTF-8)
    and its value the count as decimal text (``b"17"``). For each output, in
    (partition, offset) order:

    * unexpected: its key is not an input word, or its value is not the canonical
      decimal text of a count v with 1 <= v <= N_w (``b"017"``, ``b" 1"`` are unexpected);
    * duplicate: (w, v) was already output (at a lower partition, or lower offset);
    * out of order: not a duplicate, and an earlier valid output for w in the same
      partition has a higher value;
    * lost (per word): each v in 1..N_w that no valid output carries.

    ``lost = Σ_w |{1..N_w} - values(w)|`` and ``duplicates = Σ_w (valid outputs(w) -
    |values(w)|)``, where values(w) is the set of valid values output for w.
    """
    del input_topic  # the input is only counted; violations point at the output
    expected = Counter(w for record in inputs for w in words(record.value))
    violations = running_count_violations(expected, outputs, output_topic)
    return _result(Check.RUNNING_COUNT, sum(expected.values()), len(outputs), violations, bin_width)


def running_count_violations(
    expected: Counter[str], outputs: Iterable[Record], output_topic: str
) -> list[Violation]:
    """Every violation of `running_count`, given each word's number of occurrences.

    The definition itself (see `running_count`), for callers that count the
    input their own way (the demo knows its lines) or need every violation
    rather than a summary.
    """
    violations: list[Violation] = []
    seen: dict[str, set[int]] = defaultdict(set)
    highest: dict[tuple[str, int], int] = {}
    for r in _in_order(outputs):
        key, value = _text(r.key), _text(r.value)
        count = int(value) if value is not None and _COUNT.fullmatch(value) else None
        kind: ViolationKind | None = None
        if key is None or count is None or not 1 <= count <= expected.get(key, 0):
            kind = ViolationKind.UNEXPECTED
        else:
            before = highest.get((key, r.partition), 0)
            if count in seen[key]:
                kind = ViolationKind.DUPLICATE
            elif count < before:
                kind = ViolationKind.OUT_OF_ORDER
            seen[key].add(count)
            highest[(key, r.partition)] = max(before, count)
        if kind is not None:
            violations.append(
                Violation(kind, output_topic, r.partition, r.offset, key, _short(r.value))
            )
    for word, n in expected.items():
        violations.extend(
            Violation(ViolationKind.LOST, output_topic, None, None, word, str(v))
            for v in range(1, n + 1)
            if v not in seen[word]
        )
    return violations


def lineage(
    inputs: Iterable[Record],
    outputs: Sequence[Record],
    *,
    input_topic: str,
    output_topic: str,
    bin_width: int = 1,
) -> CheckResult:
    """Check a 1:1 job whose outputs carry the position of the input that caused them.

    An output's lineage is the first value of each of the headers
    `LINEAGE_TOPIC_HEADER`, `LINEAGE_PARTITION_HEADER` and `LINEAGE_OFFSET_HEADER`.
    For each output, in (partition, offset) order:

    * unexpected: a lineage header is missing or not canonical decimal text, or the
      lineage names no committed record of `input_topic` (another topic, an aborted
      record, an offset outside the audited range);
    * duplicate: its lineage was already claimed by an earlier output;
    * lost (per input record): no output claims the record's position.

    ``duplicates = Σ_lineage (outputs - 1)``; order is not checked (None).
    """
    committed = {(r.partition, r.offset): r for r in inputs}
    violations: list[Violation] = []
    claimed: set[tuple[int, int]] = set()
    for r in _in_order(outputs):
        topic, part, off = (_text(_first_header(r, h)) for h in LINEAGE_HEADERS)
        source = None if None in (topic, part, off) else f"{topic}/{part}/{off}"
        position = None
        if (
            topic == input_topic
            and part is not None
            and off is not None
            and _POSITION.fullmatch(part)
            and _POSITION.fullmatch(off)
        ):
            position = (int(part), int(off))
        if position is None or position not in committed:
            kind: ViolationKind | None = ViolationKind.UNEXPECTED
        elif position in claimed:
            kind = ViolationKind.DUPLICATE
        else:
            kind = None
            claimed.add(position)
        if kind is not None:
            violations.append(
                Violation(
                    kind, output_topic, r.partition, r.offset, _text(r.key), _short(r.value), source
                )
            )
    for position, r in committed.items():
        if position not in claimed:
            violations.append(
                Violation(
                    ViolationKind.LOST, input_topic, r.partition, r.offset, _text(r.key), None
                )
            )
    return _result(Check.LINEAGE, len(committed), len(outputs), violations, bin_width)


def partition_stats(
    topic: str, records: Iterable[Record], ranges: dict[int, tuple[int, int]]
) -> tuple[PartitionStats, ...]:
    """Per-partition statistics of `records`, read from the offset `ranges` (start, end)."""
    by_partition: dict[int, list[int]] = defaultdict(list)
    for r in records:
        by_partition[r.partition].append(r.offset)
    return tuple(
        PartitionStats(
            topic,
            p,
            start,
            end,
            len(by_partition[p]),
            min(by_partition[p], default=None),
            max(by_partition[p], default=None),
        )
        for p, (start, end) in sorted(ranges.items())
    )


#: One expected output record: its key and value as text (None: no key / no value).
ExpectedRecord = tuple[str | None, str | None]


def expected_output(
    expected: Iterable[ExpectedRecord],
    outputs: Sequence[Record],
    *,
    output_topic: str,
    bin_width: int = 1,
) -> CheckResult:
    """Check an output against the records a reference says it must hold, as a multiset.

    For jobs whose correct output is known in advance (a windowed count, a join, an
    enrichment: a reference implementation computes it from the input). Keys and
    values are compared as UTF-8 text; order is not checked (None). Let n(k, v) be
    how often the reference lists (k, v). For each output, in (partition, offset) order:

    * unexpected: n(k, v) = 0;
    * duplicate: n(k, v) earlier outputs already carried (k, v);
    * lost (per reference record): each of the n(k, v) - seen(k, v) copies no output carries.

    ``outputs = Σ seen + duplicates + unexpected`` and ``lost = Σ n - Σ seen``.
    """
    want = Counter(expected)
    seen: Counter[ExpectedRecord] = Counter()
    violations: list[Violation] = []
    for r in _in_order(outputs):
        pair = (_text(r.key), _text(r.value))
        if not want[pair]:
            kind: ViolationKind | None = ViolationKind.UNEXPECTED
        elif seen[pair] >= want[pair]:
            kind = ViolationKind.DUPLICATE
        else:
            kind = None
            seen[pair] += 1
        if kind is not None:
            violations.append(
                Violation(kind, output_topic, r.partition, r.offset, pair[0], _short(r.value))
            )
    for (key, value), n in want.items():
        short = None if value is None else value[:VALUE_CHARS]
        violations.extend(
            Violation(ViolationKind.LOST, output_topic, None, None, key, short)
            for _ in range(n - seen[(key, value)])
        )
    return _result(Check.EXPECTED, sum(want.values()), len(outputs), violations, bin_width)


def load_expected(path: Path) -> list[ExpectedRecord]:
    """Read a reference output: JSON Lines, one ``{"key": …, "value": …}`` per record.

    Both fields are text or null (a missing field is null); blank lines are skipped.
    Raises `ConfigurationError` naming the file and line of the first malformed record.
    """
    records: list[ExpectedRecord] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read the expected output {path}: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict) or not set(item) <= {"key", "value"}:
            raise ConfigurationError(
                f'{path}:{number}: expected an object with "key" and "value", got {line[:80]!r}'
            )
        key, value = item.get("key"), item.get("value")
        if not all(x is None or isinstance(x, str) for x in (key, value)):
            raise ConfigurationError(f"{path}:{number}: key and value must be text or null")
        records.append((key, value))
    return records
