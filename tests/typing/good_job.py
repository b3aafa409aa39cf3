"""A realistic typed job: `tests/unit/test_typing.py` checks it passes ``mypy --strict``.

Not a test (pytest does not collect this directory): the type checker reads it,
nothing runs it. Every step's type is pinned with `assert_type`, so a change
that loosens the front door's types (to `Any`, say) fails here too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, assert_type

from kstream import (
    LATE,
    Job,
    KafkaSink,
    KafkaSource,
    KeyedContext,
    KeyedStream,
    Serde,
    Sink,
    Stream,
    Tagged,
    WindowedStream,
    tumbling,
)


@dataclass(frozen=True)
class Order:
    customer: str
    amount_cents: int
    timestamp_ms: int


class OrderSerde:
    """Orders as JSON objects: a `Serde[Order]`."""

    name = "order-json"

    def dumps(self, value: Order) -> bytes | None:
        return json.dumps(vars(value)).encode()

    def loads(self, data: bytes | None) -> Order:
        assert data is not None
        return Order(**json.loads(data))


def parse_amount(line: str) -> int:
    return int(line.split(",")[1])


def running_total(
    customer: str, order: Order, ctx: KeyedContext
) -> Iterator[tuple[str, int] | Tagged]:
    """Per customer, the total so far; big orders also go to the side output "big"."""
    total: int = ctx.get(0) + order.amount_cents
    ctx.set(total)
    if order.amount_cents > 100_000:
        yield Tagged("big", order)
    yield customer, total


def flag_large(customer: str, order: Order, ctx: KeyedContext) -> Iterator[str]:
    seen = ctx.value("large")
    if order.amount_cents > 10_000 and seen.get(False) is False:
        seen.set(True)
        yield customer


def job(params: dict[str, str]) -> Job:
    j = Job(params.get("name", "typed-orders"))

    # A KafkaSource's type follows its serde: str by default.
    lines = j.source(KafkaSource(params.get("lines", "lines")))
    assert_type(lines, Stream[str])
    amounts = lines.filter(lambda line: "," in line).map(parse_amount)
    assert_type(amounts, Stream[int])
    words = lines.flat_map(str.split)
    assert_type(words, Stream[str])
    counts = words.key_by(str.lower).count()
    assert_type(counts, Stream[tuple[str, int]])
    counts.sink(KafkaSink("word-counts"))
    amounts.rebalance(parallelism=2).map(str).sink(KafkaSink("amounts"))

    serde: Serde[Order] = OrderSerde()
    orders = j.source(KafkaSource("orders", serde, timestamps="kafka"))
    assert_type(orders, Stream[Order])
    by_customer = orders.key_by(lambda o: o.customer)
    assert_type(by_customer, KeyedStream[str, Order])
    totals = by_customer.process(running_total)
    assert_type(totals, Stream[tuple[str, int]])
    totals.sink(KafkaSink("totals"))
    big: Stream[Any] = totals.side_output("big")
    big.sink(KafkaSink("big-orders", value_serde="json"))

    windowed = orders.key_by(lambda o: o.customer).window(
        tumbling(size_ms=60_000), allowed_lateness_ms=5_000
    )
    assert_type(windowed, WindowedStream[str, Order])
    per_minute = windowed.aggregate(0, lambda acc, o: acc + o.amount_cents)
    per_minute.sink(KafkaSink("per-minute", value_serde="json"))
    per_minute.side_output(LATE).sink(KafkaSink("late", value_serde="json"))

    large = orders.key_by(lambda o: o.customer).process(flag_large)
    assert_type(large, Stream[str])
    only_str: Sink[str] = KafkaSink[str]("large-customers")
    large.sink(only_str)

    reduced = orders.key_by(lambda o: o.customer).reduce(
        lambda a, b: a if a.amount_cents >= b.amount_cents else b
    )
    assert_type(reduced, Stream[tuple[str, Order]])
    reduced.map(lambda pair: (pair[0], pair[1].amount_cents)).sink(KafkaSink("largest"))

    payments = j.source(KafkaSource("payments", value_serde="bytes"))
    assert_type(payments, Stream[bytes])
    pairs = orders.key_by(lambda o: o.customer).interval_join(
        payments.key_by(bytes.decode), lower_ms=0, upper_ms=60_000
    )
    pairs.sink(KafkaSink("paid", value_serde="json"))
    return j
