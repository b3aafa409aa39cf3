"""A job with two Kafka sources keyed by the same key and connected into one
co-process that keeps a running state per key over both sides.

Input records are ``"<key> <seq> <amount>"``. Every output is ``(key, "<side>
<side count> <seq> <total count> <total amount>")``: the side's own count and
the record's sequence number make each side's outputs checkable in order, the
totals check that both sides share one state. Records of amount 1 also go to
the side output ``ones`` as ``(key, "<side> <seq>")``. A second branch
reads both topics again and writes their round-robin `union` to ``all``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kstream import Job, KafkaSink, KafkaSource, Tagged, ValueState


def key_of(value: str) -> str:
    return value.split(" ", 1)[0]


def running(
    side: str,
) -> Callable[[str, str, ValueState], Iterator[tuple[str, str] | Tagged]]:
    def fn(key: str, value: str, state: ValueState) -> Iterator[tuple[str, str] | Tagged]:
        _, seq, amount = value.split(" ")
        a, b, total, amount_sum = state.get((0, 0, 0, 0))
        a, b = (a + 1, b) if side == "a" else (a, b + 1)
        total, amount_sum = total + 1, amount_sum + int(amount)
        state.set((a, b, total, amount_sum))
        yield key, f"{side} {a if side == 'a' else b} {seq} {total} {amount_sum}"
        if amount == "1":
            yield Tagged("ones", (key, f"{side} {seq}"))

    fn.__qualname__ = f"running_{side}"
    return fn


def job(params: dict[str, Any]) -> Job:
    j = Job(params["name"])
    a = j.source(KafkaSource(params["a"])).key_by(key_of)
    b = j.source(KafkaSource(params["b"])).key_by(key_of)
    out = a.connect(b).process(running("a"), running("b"), name="running")
    out.sink(KafkaSink(params["output"]))
    out.side_output("ones").sink(KafkaSink(params["ones"]))
    both = j.source(KafkaSource(params["a"])).map(lambda v: f"a {v}")
    both.union(j.source(KafkaSource(params["b"])).map(lambda v: f"b {v}")).sink(
        KafkaSink(params["all"])
    )
    return j
