"""A query's committed output against its reference, as multisets of JSON values.

Every query's output is a set of results each written once, in an order that
depends on partitions and scheduling (the windowed ones write final results
only, the window in the value), so the output must equal the reference as a
multiset: a missing, a duplicated and a wrong result each show. Values are
compared in canonical JSON (sorted keys), so a float compares by its exact
decimal form, as `json` writes and reads it back.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


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


def read_output(bootstrap: str, topic: str) -> list[Any]:
    """Every committed value of `topic` (read_committed, once no transaction is open)."""
    from kstream.testing import read_all, wait_settled  # the Kafka client only when reading

    wait_settled(bootstrap, topic)
    return [json.loads(r.value or b"null") for r in read_all(bootstrap, topic)]
