"""An event-time keyed job with timers, and its pure reference.

Input lines are ``"<key> <timestamp ms> <value>"``; the source stamps each
record with its timestamp. Per key, the job sums values into buckets
``[T - BUCKET, T)`` and emits ``(key, {"t": T, "sum": s, "wm": W})`` from
``on_timer`` once the watermark W reaches T, and at ``final`` the key's
record count ``(key, {"final": n, "wm": W})``; every record also emits
``(key, {"seen": ts, "stamp": S, "wm": W})`` with its partition stamp S and the
watermark it was processed under, so a test can check from the output alone
that stamps are reproducible and the watermark never moved back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.state.api import KeyedContext

#: Width of a bucket (ms): a sum is emitted per key at every multiple of it.
BUCKET = 1000
#: A key's first record registers a timer at parameter ``final`` (ms) that
#: emits the key's record count: registered once, so it fires only if the timer
#: survived every restore.


def bucket_end(ts: int) -> int:
    return (ts // BUCKET + 1) * BUCKET


def key_of(line: str) -> str:
    return line.split()[0]


def event_time(line: str) -> object:
    """The line's timestamp: an int, a float for text with a point (unusable, as a
    timestamp function's common mistake), other text as is (unusable)."""
    text = line.split()[1]
    if text.lstrip("-").isdigit():
        return int(text)
    return float(text) if text.replace(".", "", 1).isdigit() else text


Out = Iterator[tuple[str, dict[str, Any]]]


def job(params: dict[str, str]) -> Job:
    final = int(params.get("final", "0"))

    def add(key: str, line: str, ctx: KeyedContext) -> Out:
        ts = ctx.timestamp
        assert ts is not None
        end = bucket_end(ts)
        sums = ctx.map("sums")
        sums.put(end, sums.get(end, 0) + int(line.split()[2]))
        ctx.timers.register(end)
        n = ctx.value("n")
        if n.get(0) == 0 and final:
            ctx.timers.register(final)
        n.set(n.get(0) + 1)
        yield (key, {"seen": ts, "stamp": ctx.partition_watermark, "wm": ctx.watermark})

    def emit(key: str, ts: int, ctx: KeyedContext) -> Out:
        if ts == final:
            yield (key, {"final": ctx.value("n").get(0), "wm": ctx.watermark})
            return
        sums = ctx.map("sums")
        yield (key, {"t": ts, "sum": sums.get(ts), "wm": ctx.watermark})
        sums.remove(ts)

    j = Job(params["name"])
    source = KafkaSource(
        params["input"],
        timestamps=event_time,
        out_of_orderness_ms=int(params.get("ooo", "3000")),
        idle_timeout_ms=int(params.get("idle", "2000")),
    )
    (
        j.source(source)
        .key_by(key_of)
        .process(add, on_timer=emit, name="buckets")
        .sink(KafkaSink(params["output"], value_serde="json"))
    )
    return j


def stamps(partition_lines: list[str], out_of_orderness: int) -> list[int]:
    """Each line's partition stamp: its partition's watermark before it
    (largest earlier timestamp minus `out_of_orderness`; none before the first)."""
    out, top = [], None
    for line in partition_lines:
        out.append(-(2**63) if top is None else max(-(2**63), top - out_of_orderness))
        ts = int(line.split()[1])
        top = ts if top is None else max(top, ts)
    return out


def reference(lines: list[str]) -> dict[tuple[str, int], int]:
    """The sum of every (key, bucket end) the input has a record for."""
    sums: dict[tuple[str, int], int] = {}
    for line in lines:
        key, ts, value = line.split()
        at = (key, bucket_end(int(ts)))
        sums[at] = sums.get(at, 0) + int(value)
    return sums
