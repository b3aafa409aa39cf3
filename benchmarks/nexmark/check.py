"""A query's committed output against its reference, as multisets of JSON values.

Every query's output is a set of results each written once, in an order that
depends on partitions and scheduling (the windowed ones write final results
only, the window in the value), so the output must equal the reference as a
multiset: a missing, a duplicated and a wrong result each show. Values are
compared in canonical JSON (sorted keys), so a float compares by its exact
decimal form, as `json` writes and reads it back.

An updating result written as upserts (Flink's q4, `flink_sql.UPSERT_QUERIES`)
is checked as the table its records leave: the last value per key, a
tombstone deleting its key (`latest`), against the reference's rows
(`verify_upserts`); there a float compares within `FLOAT_REL_TOL`.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: How far apart two floats of an upsert table may be, relative: Flink's AVG over
#: DOUBLE keeps a float sum that every retracted closing price is subtracted from,
#: so it may differ from the reference's exact sum / N in the last digits.
FLOAT_REL_TOL = 1e-9


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Verdict:
    """How an output differs from its reference (`ok` when it does not)."""

    expected: int
    read: int
    missing: tuple[str, ...]
    extra: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.extra

    def describe(self, limit: int = 3) -> str:
        """One line: what differs, with a few examples of each side."""
        if self.ok:
            return f"{self.read} results, as expected"
        return (
            f"{self.read} results, {self.expected} expected: {len(self.missing)} missing "
            f"(e.g. {list(self.missing[:limit])}), {len(self.extra)} unexpected or "
            f"duplicated (e.g. {list(self.extra[:limit])})"
        )


def compare(output: Iterable[Any], reference: Iterable[Any]) -> Verdict:
    got = Counter(map(canonical, output))
    want = Counter(map(canonical, reference))
    return Verdict(
        expected=sum(want.values()),
        read=sum(got.values()),
        missing=tuple(sorted((want - got).elements())),
        extra=tuple(sorted((got - want).elements())),
    )


def expected_rows(query: str, expected: Any) -> int:
    """How many results the reference `expected` of `query` implies."""
    if query == "q4":
        return sum(n for n, _ in expected.values())
    return len(expected)


def verify(query: str, output: list[Any], expected: Any) -> Verdict:
    """`output` against the reference of `query`: as multisets, but q4 by its summary
    (per category the updates 1..N each once and the last average; `reference.q4`)."""
    if query != "q4":
        return compare(output, expected)
    from benchmarks.nexmark.reference import q4_summary

    try:
        summary = q4_summary(output)
    except ValueError as exc:
        return Verdict(expected_rows(query, expected), len(output), (), (str(exc),))
    got = [{"category": c, "count": n, "avg": a} for c, (n, a) in summary.items()]
    want = [{"category": c, "count": n, "avg": a} for c, (n, a) in expected.items()]
    verdict = compare(got, want)
    return Verdict(expected_rows(query, expected), len(output), verdict.missing, verdict.extra)


@dataclass(frozen=True)
class Upsert:
    """One record of an upsert topic, read: its key and its value (None: a tombstone)."""

    key: Any
    value: Any


def latest(records: Iterable[Upsert], table: dict[str, Any] | None = None) -> dict[str, Any]:
    """The table `records` leave, applied in order onto `table` (a new one when None):
    per key (in canonical JSON) its last value; a tombstone deletes its key. Records of
    one key are in one partition, so a reader's order per partition is enough."""
    out: dict[str, Any] = {} if table is None else table
    for record in records:
        key = canonical(record.key)
        if record.value is None:
            out.pop(key, None)
        else:
            out[key] = record.value
    return out


def expected_table(query: str, expected: Any) -> dict[str, Any]:
    """The reference of `query` as the table its upserts must leave (key -> row).

    Only q4 has an updating result: per category ``{"category", "count", "avg"}``
    keyed by ``{"category"}``. ValueError for any other query."""
    if query != "q4":
        raise ValueError(f"{query} has no updating result to read as upserts")
    return {
        canonical({"category": c}): {"category": c, "count": n, "avg": a}
        for c, (n, a) in expected.items()
    }


def same(got: Any, want: Any) -> bool:
    """Equal values of the same JSON types, but two floats within `FLOAT_REL_TOL`
    (an int, such as a count, is exact, and never equals a float)."""
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    if isinstance(got, float) and isinstance(want, float):
        return math.isclose(got, want, rel_tol=FLOAT_REL_TOL)
    return type(got) is type(want) and bool(got == want)


def verify_table(query: str, table: dict[str, Any], expected: Any) -> Verdict:
    """The table an upsert output left (`latest`) against the reference of `query`:
    every key's row as the reference's (`same`), no key more or less. Its results
    are keys: `expected` and `read` count the reference's and the table's."""
    want = expected_table(query, expected)
    wrong = {k for k in want.keys() | table.keys() if not same(table.get(k), want.get(k))}
    return Verdict(
        expected=len(want),
        read=len(table),
        missing=tuple(sorted(f"{k}: {canonical(want[k])}" for k in wrong & want.keys())),
        extra=tuple(sorted(f"{k}: {canonical(table[k])}" for k in wrong & table.keys())),
    )


def verify_upserts(query: str, records: list[Upsert], expected: Any) -> Verdict:
    """An upsert output, read in order, against the reference of `query`."""
    return verify_table(query, latest(records), expected)


def read_output(bootstrap: str, topic: str) -> list[Any]:
    """Every committed value of `topic` (read_committed, once no transaction is open)."""
    from kstream.testing import read_all, wait_settled  # the Kafka client only when reading

    wait_settled(bootstrap, topic)
    return [json.loads(r.value or b"null") for r in read_all(bootstrap, topic)]
