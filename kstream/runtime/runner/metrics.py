"""The coordinator's Prometheus metrics: checkpoints, aborts, recoveries, restarts.

The runner records each event as it carries out the coordinator's command (a
few per checkpoint: nothing here is on a worker's path); what `RunStats`
already keeps (generation, restarts, the latest checkpoint) is read at scrape
time. Abort reasons and recovery causes become bounded label values
(`kstream.protocol.causes`); every value is present from the start at 0, so a
rate over it is defined before the first event. Counters count what this
runner process saw: a new runner starts at zero.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kstream.infra.metrics import ProcessMetrics
from kstream.protocol.causes import ABORT_REASONS, RECOVERY_CAUSES, abort_reason, recovery_cause
from kstream.runtime.runner.stats import RunStats

__all__ = ["RUNNER_METRICS", "RunnerMetrics"]

#: name -> (type, help); counters without ``_total``, which the exposition adds.
RUNNER_METRICS: dict[str, tuple[str, str]] = {
    "kstream_checkpoints_completed": ("counter", "Checkpoints this coordinator completed."),
    "kstream_checkpoints_aborted": ("counter", "Checkpoints aborted, by bounded reason."),
    "kstream_recoveries": ("counter", "Rollbacks of the job (not its start), by bounded cause."),
    "kstream_checkpoint_duration_seconds": (
        "histogram",
        "Checkpoints from trigger to completion, end to end.",
    ),
    "kstream_checkpoint_size_bytes": ("gauge", "Size of the latest completed checkpoint."),
    "kstream_checkpoint_latest_id": ("gauge", "Id of the latest completed checkpoint."),
    "kstream_checkpoint_latest_timestamp_seconds": (
        "gauge",
        "When the latest checkpoint completed (Unix time).",
    ),
    "kstream_generation": ("gauge", "The job's running generation."),
    "kstream_worker_restarts": ("counter", "Worker processes this runner restarted."),
}

_SECONDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class RunnerMetrics(Collector):
    """The metrics of job `job`'s coordinator, in `registry` with the process's."""

    def __init__(self, job: str, stats: RunStats) -> None:
        self.job = job
        self.stats = stats
        self.registry = CollectorRegistry()

        def text(name: str) -> str:
            return RUNNER_METRICS[name][1]

        self._completed = Counter(
            "kstream_checkpoints_completed",
            text("kstream_checkpoints_completed"),
            ["job"],
            registry=self.registry,
        ).labels(job)
        aborted = Counter(
            "kstream_checkpoints_aborted",
            text("kstream_checkpoints_aborted"),
            ["job", "reason"],
            registry=self.registry,
        )
        self._aborted = {r: aborted.labels(job, r) for r in ABORT_REASONS}
        recoveries = Counter(
            "kstream_recoveries",
            text("kstream_recoveries"),
            ["job", "cause"],
            registry=self.registry,
        )
        self._recoveries = {c: recoveries.labels(job, c) for c in RECOVERY_CAUSES}
        self._duration = Histogram(
            "kstream_checkpoint_duration_seconds",
            text("kstream_checkpoint_duration_seconds"),
            ["job"],
            registry=self.registry,
            buckets=_SECONDS,
        ).labels(job)
        self._size = 0
        self._completed_at = 0.0
        self.registry.register(self)
        ProcessMetrics({"job": job, "worker": "coordinator"}, self.registry)

    def completed(self, duration_s: float, size: int, at: float | None) -> None:
        """A checkpoint of `size` bytes completed `duration_s` after its trigger, at
        `at` (Unix time: the stamp of its `completed` message)."""
        self._completed.inc()
        self._duration.observe(duration_s)
        self._size = size
        if at is not None:
            self._completed_at = at

    def aborted(self, reason: str) -> None:
        """A checkpoint aborted for `reason` (the coordinator's sentence)."""
        self._aborted[abort_reason(reason)].inc()

    def recovered(self, reason: str) -> None:
        """The job rolled back for `reason` (the coordinator's sentence)."""
        self._recoveries[recovery_cause(reason)].inc()

    def collect(self) -> Iterator[Metric]:
        """What `RunStats` keeps, read now."""
        job = [self.job]
        stats = self.stats

        def gauge(name: str, value: float) -> GaugeMetricFamily:
            fam = GaugeMetricFamily(name, RUNNER_METRICS[name][1], labels=["job"])
            fam.add_metric(job, value)
            return fam

        yield gauge("kstream_generation", stats.generation)
        restarts = CounterMetricFamily(
            "kstream_worker_restarts", RUNNER_METRICS["kstream_worker_restarts"][1], labels=["job"]
        )
        restarts.add_metric(job, stats.restarts)
        yield restarts
        if stats.latest is not None:
            yield gauge("kstream_checkpoint_latest_id", stats.latest)
            yield gauge("kstream_checkpoint_size_bytes", self._size)
            if self._completed_at:
                yield gauge("kstream_checkpoint_latest_timestamp_seconds", self._completed_at)
