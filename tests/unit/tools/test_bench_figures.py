"""The figures beyond throughput: quantiles, the capacity's steady rate, their tables."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.figures_report import markdown, plots, sections
from benchmarks.harness import percentile, quantiles
from benchmarks.latency import steady_rate


@given(st.lists(st.floats(-1e6, 1e6), min_size=1))
def test_quantiles_are_members_and_ordered(values: list[float]) -> None:
    q = quantiles(values)
    assert q["n"] == len(values)
    assert q["p50"] in values
    assert q["p99"] in values
    assert min(values) <= q["p50"] <= q["p99"] <= q["max"] == max(values)  # type: ignore[operator]


def test_quantiles_nearest_rank_and_empty() -> None:
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(values[:10], 0.99) == 10.0
    assert percentile([7.0], 0.5) == 7.0
    assert quantiles([]) == {"n": 0, "p50": None, "p99": None, "max": None}


def test_steady_rate_leaves_out_start_up_and_the_tail() -> None:
    # Start-up until t=5 covers nothing; 100 records/s from the last empty mark on;
    # the covering checkpoint at t=8 ends it, later marks do not count.
    marks = [(0.0, 0), (5.0, 0), (6.0, 100), (7.0, 200), (8.0, 300), (20.0, 300)]
    assert steady_rate(marks, 300) == 100.0


def test_steady_rate_over_the_whole_run_when_one_checkpoint_covers_all() -> None:
    assert steady_rate([(0.0, 0), (4.0, 0), (6.0, 300)], 300) == 150.0
    assert steady_rate([(0.0, 0), (3.0, 300)], 300) == 100.0


def _q(p50: float, p99: float) -> dict[str, Any]:
    return {"n": 4, "p50": p50, "p99": p99, "max": p99}


def _doc() -> dict[str, Any]:
    run = {
        "interval_s": 0.5,
        "rate_words_per_s": 1000.0,
        "achieved_words_per_s": 990.0,
        "latency_ms": _q(300.0, 1200.0),
        "target_p99_ms": 750.0,
        "target_met": False,
        "checkpoint_duration_ms": _q(200.0, 400.0),
        "alignment_ms": _q(5.0, 9.5),
        "sync_pause_ms": _q(3.0, 7.0),
        "bytes": {
            "bytes_per_input_record": {
                "channels": 100.0,
                "barriers": 0.5,
                "markers": 1.0,
                "control": 2.0,
                "output": 50.0,
            },
            "total_per_input_record": 153.5,
        },
    }
    size = {
        "keys": 1_000_000,
        "state_bytes": 2**20 * 120,
        "sync_pause_ms": _q(8.0, 15.0),
        "sync_pause_filling_ms": _q(20.0, 90.0),
        "recovery_s": 2.5,
        "worker_rss_mb": 150.4,
        "worker_peak_rss_mb": 180.0,
    }
    return {"figures": {"throughput": [], "latency": {"runs": [run]}, "state": {"sizes": [size]}}}


def test_tables_say_whether_the_latency_target_is_met() -> None:
    by = dict(sections(_doc()))
    latency = by["End-to-end latency, exactly-once, at a steady input rate"]
    assert latency[1] == ["0.5", "990", "4", "300", "1,200", "1,200", "p99 ≤ 750 ms: NOT met"]
    checkpoints = by["Checkpoints in the same runs"]
    assert checkpoints[1] == ["0.5", "4", "200", "400", "5.0", "9.5", "3.0", "7.0"]
    state = by["Keyed state size: synchronous pause, recovery, worker RSS"]
    assert state[1] == ["1,000,000", "120.0", "8.0", "15.0", "90.0", "2.50", "150", "180"]


def test_markdown_holds_every_section_and_absent_figures_are_left_out() -> None:
    text = markdown(_doc())
    assert text.count("\n**") == 4
    assert "| 0.5 | 100.0 | 0.5 | 1.0 | 2.0 | 50.0 | 153.5 |" in text
    assert markdown({"figures": {"throughput": []}}) == ""


def test_plots_one_png_per_figure() -> None:
    pngs = plots(_doc())
    assert set(pngs) == {"latency.png", "state.png"}
    assert all(p.startswith(b"\x89PNG") for p in pngs.values())
