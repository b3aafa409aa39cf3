"""The worker's collector: what a scrape reads, across generations, parsed as Prometheus does."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kstream.protocol.watermarks import MIN_WATERMARK
from kstream.runtime.state.store import StateStore
from kstream.runtime.worker.epochs import SinkEpochs
from kstream.runtime.worker.metrics import WORKER_METRICS, WorkerMetrics


@dataclass
class _Stats:
    records: int = 0
    dead_letters: int = 0
    replayed: int = 0


@dataclass
class _Flow:
    pauses: int = 0


@dataclass
class _Element:
    timed: bool = False
    watermark: int = MIN_WATERMARK


@dataclass
class _Consumer:
    """Positions and cached high watermarks, as librdkafka keeps them."""

    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    highs: dict[tuple[str, int], int] = field(default_factory=dict)
    closed: bool = False

    def assignment(self) -> list[TopicPartition]:
        if self.closed:
            raise RuntimeError("Consumer closed")
        return [TopicPartition(t, p) for t, p in self.positions]

    def position(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self.positions[tp.topic, tp.partition])
                for tp in tps]  # fmt: skip

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool) -> tuple[int, int]:
        assert cached, "a scrape must never send a request"
        return (0, self.highs.get((tp.topic, tp.partition), -1001))


@dataclass
class _Task:
    id: str
    stats: _Stats = field(default_factory=_Stats)
    records_out: int = 0
    flow: _Flow = field(default_factory=_Flow)
    element: _Element = field(default_factory=_Element)
    consumer: _Consumer = field(default_factory=_Consumer)
    sinks: dict[str, Any] = field(default_factory=dict)
    epochs: SinkEpochs = field(default_factory=lambda: SinkEpochs(0.0))
    state: StateStore | None = None


def scrape(m: WorkerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the endpoint's text, keyed by name and sorted labels."""
    text = generate_latest(m.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def at(subtask: str, **more: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"job": "j", "worker": "w0", "subtask": subtask, **more}.items()))


def test_counts_are_read_at_scrape_time_and_survive_a_rollback() -> None:
    m = WorkerMetrics("j", "w0")
    src, ch = _Task("s0-0"), _Task("s1-0")
    m.running([src, ch], generation=1, seconds=0.25)  # type: ignore[list-item]
    src.stats.records, ch.stats.records, ch.records_out = 100, 80, 80
    ch.stats.dead_letters, src.flow.pauses = 2, 3
    got = scrape(m)
    assert got["kstream_records_in_total", at("s0-0")] == 100
    assert got["kstream_records_in_total", at("s1-0")] == 80
    assert got["kstream_records_out_total", at("s1-0")] == 80
    assert got["kstream_dead_letters_total", at("s1-0")] == 2
    assert got["kstream_flow_pauses_total", at("s0-0")] == 3
    assert got["kstream_worker_generation", (("job", "j"), ("worker", "w0"))] == 1
    assert got["kstream_restore_seconds_count", (("job", "j"), ("worker", "w0"))] == 1
    # A rollback: the subtasks are replaced by new ones counting from zero.
    m.retire()
    src.consumer.closed = ch.consumer.closed = True  # closed after retire: never read again
    src2 = _Task("s0-0")
    m.running([src2, _Task("s1-0")], generation=2, seconds=0.5)  # type: ignore[list-item]
    src2.stats.records = 5
    got = scrape(m)
    assert got["kstream_records_in_total", at("s0-0")] == 105, "a counter never goes down"
    assert got["kstream_records_out_total", at("s1-0")] == 80
    assert got["kstream_worker_restores_total", (("job", "j"), ("worker", "w0"))] == 2


def test_lag_per_input_partition_only_where_known() -> None:
    m = WorkerMetrics("j", "w0")
    t = _Task("s0-0")
    t.consumer.positions = {("in", 0): 40, ("in", 1): 7, ("in", 2): -1001}
    t.consumer.highs = {("in", 0): 50, ("in", 1): 7}
    m.running([t], generation=1, seconds=0.0)  # type: ignore[list-item]
    lags = {labels: v for (name, labels), v in scrape(m).items() if name == "kstream_consumer_lag"}
    assert lags == {
        at("s0-0", topic="in", partition="0"): 10,
        at("s0-0", topic="in", partition="1"): 0,
    }


def test_watermark_sinks_and_snapshots() -> None:
    m = WorkerMetrics("j", "w0")
    timed, plain = _Task("s0-0"), _Task("s1-0")
    timed.element = _Element(timed=True, watermark=1_700_000_000_500)
    plain.sinks = {"out": object()}
    plain.epochs = SinkEpochs(now=0.0)
    plain.epochs.sealed(7, now=1.0)  # epoch of checkpoint 7 (opened at 0) is pending
    m.running([timed, plain], generation=1, seconds=0.0)  # type: ignore[list-item]
    m.acked("s1-0", size=4096, alignment_ms=12.0, sync_ms=3.0)
    got = scrape(m)
    assert got["kstream_watermark_seconds", at("s0-0")] == 1_700_000_000.5
    assert ("kstream_watermark_seconds", at("s1-0")) not in got, "no watermark: no sample"
    assert got["kstream_sink_pending_epochs", at("s1-0")] == 1
    assert got["kstream_sink_open_transaction_age_seconds", at("s1-0")] > 1.0
    assert ("kstream_sink_pending_epochs", at("s0-0")) not in got, "no sink: no sample"
    assert got["kstream_state_size_bytes", at("s1-0")] == 4096
    w = (("job", "j"), ("worker", "w0"))
    assert got["kstream_checkpoint_alignment_seconds_sum", w] == 0.012
    assert got["kstream_checkpoint_sync_seconds_bucket", (*w[:1], ("le", "0.005"), w[1])] == 1
    assert got["kstream_snapshot_size_bytes_count", w] == 1
    plain.epochs.committed(7)
    assert scrape(m)["kstream_sink_pending_epochs", at("s1-0")] == 0


def test_sink_epochs() -> None:
    e = SinkEpochs(now=10.0)
    assert (e.pending(), e.oldest_age(12.0)) == (0, 2.0)
    e.sealed(1, now=11.0)
    e.sealed(2, now=13.0)
    assert (e.pending(), e.oldest_age(14.0)) == (2, 4.0)
    e.committed(1)
    assert (e.pending(), e.oldest_age(14.0)) == (1, 3.0)
    e.committed(5)
    assert (e.pending(), e.oldest_age(14.0)) == (0, 1.0)


def test_rocksdb_figures_of_stateful_subtasks(tmp_path: Path) -> None:
    m = WorkerMetrics("j", "w0")
    store = StateStore(tmp_path / "db")
    stateful, stateless = _Task("s1-0", state=store), _Task("s0-0")
    m.running([stateful, stateless], generation=1, seconds=0.0)  # type: ignore[list-item]
    counts = store.context("s1.count")
    for i in range(2000):
        counts.key = f"word-{i}".encode()
        counts.set(i)
    store.flush()
    got = scrape(m)
    assert got["kstream_rocksdb_keys", at("s1-0")] == 2000
    assert got["kstream_rocksdb_memory_bytes", at("s1-0", kind="memtables")] > 2000 * 8
    assert ("kstream_rocksdb_keys", at("s0-0")) not in got, "stateless: no sample"
    # A checkpoint flushes the memtable into an SST file: the bytes move to disk.
    store.checkpoint(tmp_path / "chk")
    got = scrape(m)
    assert got["kstream_rocksdb_sst_bytes", at("s1-0")] > 0
    assert got["kstream_rocksdb_live_data_bytes", at("s1-0")] > 0
    m.retire()
    store.close()
    assert not any(name.startswith("kstream_rocksdb") for name, _ in scrape(m))


def test_every_declared_name_is_served(tmp_path: Path) -> None:
    m = WorkerMetrics("j", "w0")
    t = _Task("s0-0", sinks={"o": object()}, state=StateStore(tmp_path / "db"))
    t.element = _Element(timed=True, watermark=1000)
    t.consumer.positions, t.consumer.highs = {("in", 0): 1}, {("in", 0): 1}
    m.running([t], generation=1, seconds=0.0)  # type: ignore[list-item]
    m.acked("s0-0", 1, 1.0, 1.0)
    served = {f.name for f in text_string_to_metric_families(generate_latest(m.registry).decode())}
    assert set(WORKER_METRICS) <= served
    assert "process_resident_memory_bytes" in served
    rss = scrape(m)["process_resident_memory_bytes", (("job", "j"), ("worker", "w0"))]
    assert rss > 1_000_000, "this process's RSS, labelled as the worker's series"
