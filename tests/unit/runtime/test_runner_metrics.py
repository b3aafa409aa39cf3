"""The coordinator's metrics: completions, aborts and recoveries by bounded label."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kstream.protocol.causes import ABORT_REASONS, RECOVERY_CAUSES
from kstream.runtime.runner.metrics import RUNNER_METRICS, RunnerMetrics
from kstream.runtime.runner.stats import RunStats


def samples(m: RunnerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(m.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def test_events_by_bounded_label() -> None:
    stats = RunStats()
    m = RunnerMetrics("j", stats)
    got = samples(m)
    # Every label value is there at 0 before the first event.
    for r in ABORT_REASONS:
        assert got["kstream_checkpoints_aborted_total", (("job", "j"), ("reason", r))] == 0
    for c in RECOVERY_CAUSES:
        assert got["kstream_recoveries_total", (("cause", c), ("job", "j"))] == 0
    assert ("kstream_checkpoint_latest_id", (("job", "j"),)) not in got
    m.completed(0.3, 2048, 1_800_000_000.0)
    stats.latest, stats.generation, stats.restarts = 10250, 2, 1
    m.completed(1.5, 4096, 1_800_000_001.5)
    m.aborted("declined by s1-0: snapshot not stored: disk full")
    m.aborted("not complete within 60s")
    m.aborted("not complete within 60s")
    m.recovered("worker w1 lost: killed by SIGKILL")
    got = samples(m)
    j = (("job", "j"),)
    assert got["kstream_checkpoints_completed_total", j] == 2
    assert got["kstream_checkpoint_duration_seconds_count", j] == 2
    assert got["kstream_checkpoint_duration_seconds_sum", j] == 1.8
    assert got["kstream_checkpoint_duration_seconds_bucket", (("job", "j"), ("le", "0.5"))] == 1
    assert got["kstream_checkpoints_aborted_total", (("job", "j"), ("reason", "timeout"))] == 2
    assert got["kstream_checkpoints_aborted_total", (("job", "j"), ("reason", "declined"))] == 1
    assert got["kstream_recoveries_total", (("cause", "worker_lost"), ("job", "j"))] == 1
    assert got["kstream_checkpoint_latest_id", j] == 10250
    assert got["kstream_checkpoint_size_bytes", j] == 4096
    assert got["kstream_generation", j] == 2
    assert got["kstream_worker_restarts_total", j] == 1
    assert got["kstream_checkpoint_latest_timestamp_seconds", j] == 1_800_000_001.5
    served = {f.name for f in text_string_to_metric_families(generate_latest(m.registry).decode())}
    assert set(RUNNER_METRICS) <= served
