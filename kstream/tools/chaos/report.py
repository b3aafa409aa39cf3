"""A campaign's report: ``report.json`` and ``chaos.png`` in the campaign's directory.

The plot shares one time axis (seconds after the start): committed outputs
per second as the checker saw them, the faults as vertical lines (pauses as
spans) coloured by kind, below it the cumulative completed and aborted
checkpoints from the job's checkpoint history, and at the bottom the workers'
resident memory (sum and largest) and the job's disk (broker data, checkpoints):
a long run shows them flat.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kstream.tools.chaos.campaign import CampaignResult
from kstream.tools.chaos.resources import SAMPLE_EVERY_S, ResourceSample
from kstream.tools.chaos.schedule import KINDS, SINK_KINDS

__all__ = ["summary_lines", "write_report"]

_COLOURS = dict(
    zip((*KINDS, *SINK_KINDS), ("C3", "C1", "C4", "C0", "C5", "C6", "C2", "C8"), strict=True)
)


def _checkpoint_times(result: CampaignResult) -> tuple[list[float], list[float]]:
    """When checkpoints completed and were aborted, in seconds after the start."""
    done, aborted = [], []
    for r in result.checkpoints:
        if r.triggered_at is None:
            continue
        t = r.triggered_at + (r.duration_s or 0.0) - result.started_wall
        if r.status == "completed":
            done.append(t)
        elif r.status == "aborted":
            aborted.append(t)
    return sorted(done), sorted(aborted)


_MB = 1024 * 1024
#: The sampled figures, as (field of `ResourceSample`, name in the report).
_RESOURCES = (
    ("rss_sum", "workers_rss_sum_mb"),
    ("rss_max", "workers_rss_max_mb"),
    ("broker_disk", "broker_disk_mb"),
    ("internal_disk", "internal_topics_disk_mb"),
    ("checkpoint_disk", "checkpoint_disk_mb"),
)


def resources_json(samples: tuple[ResourceSample, ...]) -> dict[str, Any]:
    """Each figure's first, largest and last value (MB), and every sample."""
    summary = {
        name: {
            "first": round(getattr(samples[0], f) / _MB, 1),
            "max": round(max(getattr(x, f) for x in samples) / _MB, 1),
            "last": round(getattr(samples[-1], f) / _MB, 1),
        }
        for f, name in _RESOURCES
        if samples
    }
    return {"every_s": SAMPLE_EVERY_S, **summary, "samples": [asdict(x) for x in samples]}


def report_json(result: CampaignResult) -> dict[str, Any]:
    c = result.config
    v = result.verdict
    statuses = Counter(r.status for r in result.checkpoints)
    starts = [f.at for f in result.faults]
    return {
        "passed": result.passed,
        "config": {
            "workload": c.workload.name,
            "duration_s": c.duration,
            "seed": c.seed,
            "rate_lines_per_s": c.rate,
            "workers": c.workers,
            "mean_gap_s": c.mean_gap,
            "kinds": list(c.kinds),
            "checkpoint_interval_s": c.checkpoint_interval,
            "guarantee": c.guarantee,
            "worker_stop_s": c.worker_stop_s,
            "broker_pause_s": c.broker_pause_s,
            "broker_port": c.port,
            "table": None if c.table is None else c.table.location,
            "warmup_s": c.warmup,
        },
        "job": result.job_name,
        "wall_time_s": round(result.duration_s, 1),
        "faults": {
            "total": len(result.faults),
            "scheduled": result.scheduled,
            "by_kind": result.by_kind,
        },
        "verdict": {
            "input_lines": v.inputs,
            "expected_outputs": v.expected,
            "outputs": v.outputs,
            "duplicates": v.duplicates,
            "lost": v.lost,
            "out_of_order": v.out_of_order,
            "wrong": v.wrong,
            "unfinished_keys": v.unfinished,
            "examples": list(v.examples),
        },
        "drained": result.drained,
        "checkpoints": {
            "completed": statuses["completed"],
            "aborted": statuses["aborted"],
            "in_progress": statuses["in progress"],
        },
        "recoveries": result.recoveries,
        "runner_starts": result.runner_starts,
        "checker": {
            "reconnects": result.checker_reconnects,
            "outputs_only_seen_at_the_end": result.checker_missed,
            "table_reads_failed": result.checker_failed_reads,
        },
        "input_producer_replacements": result.feeder_replacements,
        "resources": resources_json(result.resources),
        "runner_exits": list(result.runner_exits),
        "incidents": list(result.incidents),
        "fault_log": [{**asdict(f), "window": i} for i, f in enumerate(result.faults)],
        "windows": [
            {
                **asdict(w),
                "from_s": None if w.window < 0 else starts[w.window],
                "fault": "before the first fault" if w.window < 0 else result.faults[w.window].kind,
            }
            for w in v.windows
        ],
    }


def _plot(result: CampaignResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seen = result.seen
    end = max([result.duration_s, *seen])
    fig, (top, bottom, usage) = plt.subplots(
        3, 1, figsize=(14, 9), sharex=True, height_ratios=[3, 2, 2]
    )
    per_s = Counter(int(t) for t in seen)
    xs = list(range(int(end) + 1))
    top.plot(xs, [per_s.get(x, 0) for x in xs], lw=0.7, color="k", label="committed outputs/s")
    labelled: set[str] = set()
    for f in result.faults:
        label = None if f.kind in labelled else f.kind
        labelled.add(f.kind)
        colour = _COLOURS.get(f.kind, "C7")
        if f.lasted:
            top.axvspan(f.at, f.at + f.lasted, color=colour, alpha=0.2, label=label)
        else:
            top.axvline(f.at, color=colour, lw=0.8, alpha=0.8, label=label)
    top.set_ylabel("outputs/s (checker)")
    top.legend(loc="upper right", fontsize=8, ncols=4)
    done, aborted = _checkpoint_times(result)
    bottom.step(done, range(1, len(done) + 1), where="post", label="completed checkpoints")
    bottom.step(aborted, range(1, len(aborted) + 1), where="post", label="aborted checkpoints")
    bottom.set_ylabel("checkpoints (cumulative)")
    bottom.legend(loc="upper left", fontsize=8)
    _plot_resources(usage, result.resources)
    usage.set_xlabel("seconds since the campaign started")
    v = result.verdict
    fig.suptitle(
        f"kstream chaos: {result.config.workload.name}, seed {result.config.seed}: "
        f"{len(result.faults)} faults, {v.duplicates} duplicates, {v.lost} lost, "
        f"{v.out_of_order} out of order, {v.wrong} wrong"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_resources(ax: Any, samples: tuple[ResourceSample, ...]) -> None:
    """Worker memory on the left axis, the job's disk on the right one (MB)."""
    at = [x.at for x in samples]
    ax.plot(at, [x.rss_sum / _MB for x in samples], color="C0", label="workers' RSS, sum")
    ax.plot(at, [x.rss_max / _MB for x in samples], color="C9", label="largest worker's RSS")
    ax.set_ylabel("memory (MB)")
    ax.set_ylim(bottom=0)
    disk = ax.twinx()
    disk.plot(at, [x.broker_disk / _MB for x in samples], color="C1", label="broker data")
    disk.plot(at, [x.internal_disk / _MB for x in samples], color="C2", label="internal topics")
    disk.plot(at, [x.checkpoint_disk / _MB for x in samples], color="C3", label="checkpoints")
    disk.set_ylabel("disk (MB)")
    disk.set_ylim(bottom=0)
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = disk.get_legend_handles_labels()
    ax.legend(lines + more, labels + more_labels, loc="upper left", fontsize=8, ncols=4)


def write_report(result: CampaignResult) -> tuple[Path, Path]:
    """Write ``report.json`` and ``chaos.png`` into the campaign's directory."""
    out = result.config.out
    json_path = out / "report.json"
    json_path.write_text(json.dumps(report_json(result), indent=2) + "\n")
    png = out / "chaos.png"
    _plot(result, png)
    return json_path, png


def summary_lines(result: CampaignResult) -> list[str]:
    v = result.verdict
    statuses = Counter(r.status for r in result.checkpoints)
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(result.by_kind.items()))
    return [
        f"faults: {len(result.faults)} of {result.scheduled} scheduled ({kinds})",
        f"outputs: {v.outputs:,} of {v.expected:,} expected from {v.inputs:,} input lines",
        f"duplicates {v.duplicates}, lost {v.lost}, out of order {v.out_of_order}, "
        f"wrong {v.wrong}, unfinished keys {v.unfinished}",
        f"checkpoints: {statuses['completed']} completed, {statuses['aborted']} aborted; "
        f"recoveries {result.recoveries}; runner started {result.runner_starts} times "
        f"({len(result.runner_exits)} exits of its own, e.g. the broker down at its start)",
        *(f"incident: {i}" for i in result.incidents),
        "PASSED" if result.passed else "FAILED",
    ]
