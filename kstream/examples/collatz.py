"""Collatz step counts: a job with a loop.

    kstream run kstream.examples.collatz:job -p input=numbers -p output=collatz-steps

Input values are decimal numbers >= 1, one per record. Each number n travels
as ``[start, n, steps]`` around a loop until n reaches 1: the loop head
(`Stream.iterate`) sends a value at 1 to the output, every other one on to
the body (a stage of its own), which takes one Collatz step (n/2 for an even
n, 3n+1 for an odd one, steps + 1) and feeds it back to the head. Output:
key = the start as decimal text, value = its number of steps (0 for 1; 111
for 27). A record that is not a number >= 1 goes to the job's dead letters.

`reference` computes the expected output from the input alone, with a plain
loop: the exactly-once tests compare the job's committed output with it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from kstream import Job, KafkaSink, KafkaSource

__all__ = ["job", "reference", "steps"]

#: What travels around the loop: [start, current number, steps taken so far].
Value = list[int]


def start(line: str) -> Value:
    """A number from its text; refuses what is not a number >= 1 (a dead letter)."""
    n = int(line)
    if n < 1:
        raise ValueError(f"Collatz steps start at 1, got {n}")
    return [n, n, 0]


def at_one(v: Value) -> bool:
    return v[1] == 1


def above_one(v: Value) -> bool:
    return v[1] != 1


def step(v: Value) -> Value:
    """One Collatz step."""
    s, n, k = v
    return [s, n // 2 if n % 2 == 0 else 3 * n + 1, k + 1]


def result(v: Value) -> tuple[str, str]:
    return str(v[0]), str(v[2])


def job(params: dict[str, str]) -> Job:
    """The Collatz job; parameters `input`, `output` and optionally `name`."""
    source, sink = params.get("input", "numbers"), params.get("output", "collatz-steps")
    j = Job(params.get("name", f"collatz-{source}-{sink}"))
    head = j.source(KafkaSource(source)).map(start, name="start").iterate("collatz")
    head.filter(at_one, name="at_one").map(result, name="result").sink(KafkaSink(sink))
    body = head.filter(above_one, name="above_one").rebalance().map(step, name="step")
    head.feed_back(body)
    return j


def steps(n: int) -> int:
    """Collatz steps from n >= 1 to 1, by a plain loop."""
    k = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        k += 1
    return k


def reference(numbers: Iterable[int]) -> Counter[tuple[str, str]]:
    """The job's output for these inputs, as (key, value) texts with their multiplicity."""
    return Counter((str(n), str(steps(n))) for n in numbers)
