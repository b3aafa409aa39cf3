"""`benchmarks.short_interval.steady`: the latencies of outputs whose input came after a
job's first seconds."""

from __future__ import annotations

from benchmarks.short_interval import RAMP_S, steady


def test_outputs_of_the_first_seconds_of_input_are_left_out() -> None:
    ramp_ms = RAMP_S * 1000
    created = [5_000.0, 5_000.0 + ramp_ms - 1, 5_000.0 + ramp_ms, 9_000.0 + ramp_ms, 5_200.0]
    latencies = [900.0, 800.0, 120.0, 130.0, 700.0]
    assert steady(latencies, created) == [120.0, 130.0]
    assert steady([], []) == []
