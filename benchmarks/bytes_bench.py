"""Bytes a job wrote to Kafka per input record, split by what they are for.

    python -m benchmarks.bytes_bench [--lines 20000] [--interval 1] [--bootstrap-servers B]

How it is measured: after the job stopped, every record of the job's topics is
read back from offset 0 (read_uncommitted, so aborted data counts too) and its
key, value and header bytes are summed: what kstream handed to Kafka, before
compression and Kafka's batch framing. The job's topics are fresh (a unique job
name), so there is no "before" to subtract. Channel records are told apart by
their kind byte (data or barrier). Transaction markers (commit/abort control
records) are not returned to consumers, but each takes one offset: their number
is the topics' offset span minus the records read, and their bytes are that
number times `MARKER_BYTES`, the size of a one-record control batch on disk.
The broker's log-dir sizes are not read: confluent-kafka has no DescribeLogDirs.

Categories: ``channels`` (data records between stages), ``barriers`` (barrier
records in channels), ``markers`` (transaction markers in channels and output),
``control`` (the control and commit topics), ``output`` (the sink's records).

Run alone, it writes `--lines` generated lines, runs the timed word count over
them (exactly-once, 2 workers) until a checkpoint covers them, and prints the
table.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from benchmarks.harness import RunningJob
from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.infra.cluster import bootstrap_servers
from kstream.protocol.names import channel_topic, commit_topic, control_topic
from kstream.runtime.channels.format import BARRIER, decode_header
from kstream.testing import produce, unique_name
from kstream.tools.demo import _generate

#: A transaction marker on disk: a control batch's 61-byte header plus its one
#: record (attributes, deltas, a 4-byte key, a 6-byte value) of about 17 bytes.
MARKER_BYTES = 78
CATEGORIES = ("channels", "barriers", "markers", "control", "output")


@dataclass
class TopicBytes:
    """What one topic holds: data records, their bytes, and offsets that are markers."""

    records: int = 0
    payload: int = 0
    barriers: int = 0
    barrier_payload: int = 0
    markers: int = 0


@dataclass(frozen=True)
class BytesFigure:
    """Bytes per input record by category, over `input_records` input records (`words` words)."""

    input_records: int
    words: int
    totals: dict[str, int] = field(default_factory=dict)
    records: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        per = (
            {k: v / self.input_records for k, v in self.totals.items()}
            if self.input_records
            else {}
        )
        return {
            "input_records": self.input_records,
            "words": self.words,
            "bytes": self.totals,
            "records": self.records,
            "bytes_per_input_record": per,
            "total_per_input_record": sum(per.values()) if per else None,
            "how": "payload bytes read back from the job's topics; markers from offset gaps",
        }


def _record_bytes(m: Any) -> int:
    headers = m.headers() or []
    return (
        len(m.key() or b"")
        + len(m.value() or b"")
        + sum(len(k) + len(v or b"") for k, v in headers)
    )


def read_topic(bootstrap: str, topic: str, *, channel: bool) -> TopicBytes:
    """Everything in `topic` now, as `TopicBytes` (a channel's barriers counted apart)."""
    admin = Admin(bootstrap)
    marks = admin.watermarks(topic)
    out = TopicBytes()
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": unique_name("bytes-reader"),
                "isolation.level": "read_uncommitted",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            },
        )
    )
    try:
        live = {p for p, (low, high) in marks.items() if high > low}
        consumer.assign([TopicPartition(topic, p, marks[p][0]) for p in live])
        last = {p: marks[p][0] - 1 for p in live}
        span = sum(marks[p][1] - marks[p][0] for p in live)
        while live:
            for m in consumer.consume(10_000, 1.0):
                err = m.error()
                p = m.partition() or 0
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        live.discard(p)
                    continue
                last[p] = m.offset() or 0
                size = _record_bytes(m)
                if channel and decode_header(m.value() or b"")[0] == BARRIER:
                    out.barriers += 1
                    out.barrier_payload += size
                else:
                    out.records += 1
                    out.payload += size
        out.markers = span - out.records - out.barriers
    finally:
        consumer.close()
    return out


def job_bytes(
    bootstrap: str,
    job: str,
    outputs: Iterable[str],
    *,
    input_records: int,
    words: int,
    stages: int,
) -> BytesFigure:
    """The bytes job `job` wrote: its channels (stages 1..`stages`-1), control and `outputs`."""
    fig = BytesFigure(
        input_records, words, dict.fromkeys(CATEGORIES, 0), dict.fromkeys(CATEGORIES, 0)
    )
    existing = Admin(bootstrap).topics()
    channels = [
        t for t in existing if any(t.startswith(channel_topic(job, s)) for s in range(1, stages))
    ]
    for t in channels:
        b = read_topic(bootstrap, t, channel=True)
        _add(fig, "channels", b.payload, b.records)
        _add(fig, "barriers", b.barrier_payload, b.barriers)
        _add(fig, "markers", b.markers * MARKER_BYTES, b.markers)
    for t in (control_topic(job), commit_topic(job)):
        if t in existing:
            b = read_topic(bootstrap, t, channel=False)
            _add(fig, "control", b.payload, b.records)
            _add(fig, "markers", b.markers * MARKER_BYTES, b.markers)
    for t in outputs:
        b = read_topic(bootstrap, t, channel=False)
        _add(fig, "output", b.payload, b.records)
        _add(fig, "markers", b.markers * MARKER_BYTES, b.markers)
    return fig


def _add(fig: BytesFigure, category: str, size: int, records: int) -> None:
    fig.totals[category] += size
    fig.records[category] += records


def rows(fig: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(category, records, bytes, bytes per input record) rows of a figure's JSON form."""
    per = fig["bytes_per_input_record"]
    out = [
        (c, f"{fig['records'][c]:,}", f"{fig['bytes'][c]:,}", f"{per.get(c, 0):.1f}")
        for c in CATEGORIES
    ]
    total = fig["total_per_input_record"]
    out.append(("total", "", f"{sum(fig['bytes'].values()):,}", f"{total or 0:.1f}"))
    return out


def measure(bootstrap: str, lines: list[str], *, interval: float) -> dict[str, Any]:
    """Run the timed word count over `lines` until covered; its bytes figure's JSON form."""
    admin = Admin(bootstrap)
    src, dst = unique_name("bytes-in"), unique_name("bytes-out")
    admin.create_topics({src: 3, dst: 3})
    produce(bootstrap, src, [(None, line.encode()) for line in lines])
    ends = {p: high for p, (_, high) in admin.watermarks(src).items()}
    name = unique_name("bytes")
    try:
        with RunningJob(
            bootstrap,
            "timed_wordcount",
            {"input": src, "output": dst, "name": name},
            interval=interval,
            keep_channels=True,
        ) as run:
            run.wait("a checkpoint covering the input", lambda: run.covered(src, ends), 600)
            stages = len({t.stage for t in run.runner.plan.tasks})
        fig = job_bytes(
            bootstrap,
            name,
            [dst],
            input_records=len(lines),
            words=sum(len(x.split()) for x in lines),
            stages=stages,
        )
    finally:
        admin.delete_topics([src, dst])
    return {"interval_s": interval, **fig.as_json()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=20_000, help="input lines (~8 words each)")
    ap.add_argument("--interval", type=float, default=1.0, help="checkpoint interval, seconds")
    ap.add_argument("--bootstrap-servers", default=None)
    args = ap.parse_args()
    bootstrap = bootstrap_servers(args.bootstrap_servers, print)
    fig = measure(bootstrap, _generate(args.lines, seed=7), interval=args.interval)
    print(f"{fig['input_records']:,} input records ({fig['words']:,} words); {fig['how']}")
    print(f"{'category':>10} {'records':>12} {'bytes':>14} {'per input record':>17}")
    for row in rows(fig):
        print(f"{row[0]:>10} {row[1]:>12} {row[2]:>14} {row[3]:>17}")


if __name__ == "__main__":
    main()
