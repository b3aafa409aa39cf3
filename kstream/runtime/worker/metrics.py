"""A worker's Prometheus metrics: read at scrape time, observed once per checkpoint.

Nothing here runs per record. The subtasks already count what they read,
wrote and dead-lettered (their stats, the heartbeat's figures): the collector
reads those integers when Prometheus scrapes, on the HTTP server's thread,
together with the consumers' positions and cached high watermarks (local to
librdkafka: no request) for the lag. Per checkpoint the worker observes a
snapshot's alignment, synchronous pause and size, and per generation its
restore time, into histograms.

The counters are per process and per subtask id, summed over the generations
the process ran: a subtask replaced by a rollback hands its figures on
(`WorkerMetrics.retire`), so a counter never goes down within a process. A
restarted process starts at zero, which Prometheus reads as a counter reset.

One lock orders a scrape against the worker replacing its subtasks: a scrape
never reads a consumer the worker has closed, nor counts a retired subtask
twice. Names, types and help texts are declared once, in `WORKER_METRICS`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kstream.infra.metrics import ProcessMetrics
from kstream.protocol.watermarks import MIN_WATERMARK

if TYPE_CHECKING:
    from kstream.runtime.worker.subtask import Subtask

__all__ = ["WORKER_METRICS", "WorkerMetrics"]

#: Per subtask (labels job, worker, subtask, and topic/partition for the lag):
#: name -> (type, help). Counters are named without ``_total``, which the
#: exposition adds.
WORKER_METRICS: dict[str, tuple[str, str]] = {
    "kstream_records_in": (
        "counter",
        "Records a subtask read: source records (source subtasks) or channel records.",
    ),
    "kstream_records_out": ("counter", "Results a subtask handed to its sinks."),
    "kstream_dead_letters": ("counter", "Records a subtask sent to the dead-letter topic."),
    "kstream_replayed": (
        "counter",
        "Channel records processed as recorded channel state (unaligned restores).",
    ),
    "kstream_flow_pauses": ("counter", "Times flow control paused a subtask's reading."),
    "kstream_consumer_lag": (
        "gauge",
        "Records between an input partition's high watermark and the subtask's position.",
    ),
    "kstream_watermark_seconds": ("gauge", "A subtask's event-time watermark (Unix time)."),
    "kstream_sink_pending_epochs": (
        "gauge",
        "Sink epochs of a subtask pre-committed and not yet committed.",
    ),
    "kstream_sink_open_transaction_age_seconds": (
        "gauge",
        "Age of the oldest sink epoch of a subtask not yet committed.",
    ),
    "kstream_state_size_bytes": ("gauge", "Size of a subtask's latest stored snapshot."),
    "kstream_rocksdb_live_data_bytes": (
        "gauge",
        "RocksDB's estimate of a subtask's live state data.",
    ),
    "kstream_rocksdb_sst_bytes": ("gauge", "A subtask's RocksDB SST files on disk."),
    "kstream_rocksdb_memory_bytes": (
        "gauge",
        "A subtask's RocksDB memory by `kind`: memtables, block cache, table readers.",
    ),
    "kstream_rocksdb_keys": ("gauge", "RocksDB's estimate of a subtask's state keys."),
    "kstream_worker_generation": ("gauge", "The generation the worker runs (0: not joined)."),
    "kstream_worker_restores": ("counter", "Generations this worker process restored."),
    "kstream_checkpoint_alignment_seconds": (
        "histogram",
        "Per subtask snapshot: from the first barrier to the snapshot.",
    ),
    "kstream_checkpoint_sync_seconds": (
        "histogram",
        "Per subtask snapshot: the synchronous pause of processing.",
    ),
    "kstream_snapshot_size_bytes": ("histogram", "Per subtask snapshot: its stored size."),
    "kstream_restore_seconds": (
        "histogram",
        "Restoring the worker's subtasks for a generation.",
    ),
}

#: Seconds: 1 ms to 2 min.
_SECONDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
#: Bytes: 1 KiB to 16 GiB, by 4.
_BYTES = tuple(float(1024 * 4**i) for i in range(13))


@dataclass(frozen=True)
class _Figures:
    """What a subtask counted (summed over the subtasks of one id a process ran)."""

    records_in: int = 0
    records_out: int = 0
    dead_letters: int = 0
    replayed: int = 0
    flow_pauses: int = 0

    def __add__(self, other: _Figures) -> _Figures:
        return _Figures(
            self.records_in + other.records_in,
            self.records_out + other.records_out,
            self.dead_letters + other.dead_letters,
            self.replayed + other.replayed,
            self.flow_pauses + other.flow_pauses,
        )


def _figures(t: Subtask) -> _Figures:
    s = t.stats
    return _Figures(s.records, t.records_out, s.dead_letters, s.replayed, t.flow.pauses)


class WorkerMetrics(Collector):
    """The metrics of worker `worker` of job `job`, in `registry` (with the process's).

    The worker calls `running` with its subtasks once restored, `retire` before
    it closes them, `acked` per stored snapshot and `restored` per generation.
    """

    def __init__(self, job: str, worker: str) -> None:
        self.job = job
        self.worker = worker
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._tasks: Sequence[Subtask] = ()
        self._carried: dict[str, _Figures] = {}
        self._state_bytes: dict[str, int] = {}
        self._generation = 0
        self._restores = 0
        labels = ("job", "worker")

        def histogram(name: str, buckets: Sequence[float]) -> Histogram:
            return Histogram(
                name,
                WORKER_METRICS[name][1],
                labels,
                registry=self.registry,
                buckets=buckets,
            )

        self._alignment = histogram("kstream_checkpoint_alignment_seconds", _SECONDS).labels(
            job, worker
        )
        self._sync = histogram("kstream_checkpoint_sync_seconds", _SECONDS).labels(job, worker)
        self._size = histogram("kstream_snapshot_size_bytes", _BYTES).labels(job, worker)
        self._restore = histogram("kstream_restore_seconds", _SECONDS).labels(job, worker)
        self.registry.register(self)
        ProcessMetrics({"job": job, "worker": worker}, self.registry)

    # -- what the worker records ---------------------------------------------

    def running(self, tasks: Sequence[Subtask], generation: int, seconds: float) -> None:
        """`tasks` run generation `generation`, restored in `seconds`."""
        with self._lock:
            self._tasks = tuple(tasks)
            self._generation = generation
            self._restores += 1
        self._restore.observe(seconds)

    def retire(self) -> None:
        """The running subtasks are about to close: keep what they counted."""
        with self._lock:
            for t in self._tasks:
                self._carried[t.id] = self._carried.get(t.id, _Figures()) + _figures(t)
            self._tasks = ()

    def acked(self, task: str, size: int, alignment_ms: float, sync_ms: float) -> None:
        """Subtask `task` stored a snapshot of `size` bytes (once per checkpoint)."""
        self._state_bytes[task] = size
        self._alignment.observe(alignment_ms / 1000)
        self._sync.observe(sync_ms / 1000)
        self._size.observe(size)

    # -- what a scrape reads -------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """The per-subtask families, read now (on the scraping thread)."""
        fams = {n: fam for n in WORKER_METRICS if (fam := _family(n)) is not None}
        job, worker = self.job, self.worker
        now = time.monotonic()
        with self._lock:
            live = {t.id: t for t in self._tasks}
            totals = dict(self._carried)
            for tid, t in live.items():
                totals[tid] = totals.get(tid, _Figures()) + _figures(t)
            for tid, f in sorted(totals.items()):
                at = [job, worker, tid]
                fams["kstream_records_in"].add_metric(at, f.records_in)
                fams["kstream_records_out"].add_metric(at, f.records_out)
                fams["kstream_dead_letters"].add_metric(at, f.dead_letters)
                fams["kstream_replayed"].add_metric(at, f.replayed)
                fams["kstream_flow_pauses"].add_metric(at, f.flow_pauses)
            for tid, t in sorted(live.items()):
                at = [job, worker, tid]
                for topic, partition, lag in _lags(t):
                    fams["kstream_consumer_lag"].add_metric([*at, topic, str(partition)], lag)
                element = t.element
                if element.timed and element.watermark > MIN_WATERMARK:
                    fams["kstream_watermark_seconds"].add_metric(at, element.watermark / 1000)
                if t.state is not None:  # stateful, and open: `retire` takes this lock
                    db = t.state.figures()
                    fams["kstream_rocksdb_live_data_bytes"].add_metric(at, db.live_data_bytes)
                    fams["kstream_rocksdb_sst_bytes"].add_metric(at, db.sst_bytes)
                    fams["kstream_rocksdb_keys"].add_metric(at, db.keys)
                    memory = fams["kstream_rocksdb_memory_bytes"]
                    memory.add_metric([*at, "memtables"], db.memtable_bytes)
                    memory.add_metric([*at, "block_cache"], db.block_cache_bytes)
                    memory.add_metric([*at, "table_readers"], db.table_readers_bytes)
                if t.sinks:
                    fams["kstream_sink_pending_epochs"].add_metric(at, t.epochs.pending())
                    fams["kstream_sink_open_transaction_age_seconds"].add_metric(
                        at, t.epochs.oldest_age(now)
                    )
            generation, restores = self._generation, self._restores
        for tid, size in sorted(dict(self._state_bytes).items()):
            fams["kstream_state_size_bytes"].add_metric([job, worker, tid], size)
        fams["kstream_worker_generation"].add_metric([job, worker], generation)
        fams["kstream_worker_restores"].add_metric([job, worker], restores)
        yield from fams.values()


def _family(name: str) -> CounterMetricFamily | GaugeMetricFamily | None:
    """An empty family of `name` with its labels (None: a histogram, served apart)."""
    kind, text = WORKER_METRICS[name]
    if name in ("kstream_worker_generation", "kstream_worker_restores"):
        labels = ["job", "worker"]
    elif name == "kstream_consumer_lag":
        labels = ["job", "worker", "subtask", "topic", "partition"]
    elif name == "kstream_rocksdb_memory_bytes":
        labels = ["job", "worker", "subtask", "kind"]
    else:
        labels = ["job", "worker", "subtask"]
    if kind == "counter":
        return CounterMetricFamily(name, text, labels=labels)
    if kind == "gauge":
        return GaugeMetricFamily(name, text, labels=labels)
    return None


def _lags(t: Subtask) -> list[tuple[str, int, int]]:
    """(topic, partition, lag) of each input partition of `t` whose position and
    high watermark the consumer knows (none before its first fetch)."""
    consumer = t.consumer
    try:
        positions = consumer.position(consumer.assignment())
        out = []
        for tp in positions:
            if tp.offset < 0:
                continue  # nothing read or fetched yet: no position
            _, high = consumer.get_watermark_offsets(tp, cached=True)
            if high is None or high < 0:
                continue
            out.append((tp.topic, tp.partition, max(0, high - tp.offset)))
        return out
    except (KafkaException, RuntimeError):
        return []  # a consumer in trouble: its subtask fails on its own thread
