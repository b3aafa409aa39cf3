"""The throughput targets: ratios within one workload of one run, never met unmeasured."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.targets import TARGETS, Target, check, rows


def _row(key: str, words_per_s: float | None, workload: str = "wordcount") -> dict[str, Any]:
    return {"workload": workload, "key": key, "words_per_s": words_per_s}


def _by(checked: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["target"], c["workload"]): c for c in checked}


def test_a_ratio_target_is_met_at_its_bound_and_not_below() -> None:
    t = (Target("eos vs loop", "kstream-eos", "eos-loop", 1.2, ("wordcount",)),)
    met = check([_row("kstream-eos", 120.0), _row("eos-loop", 100.0)], t)
    below = check([_row("kstream-eos", 119.0), _row("eos-loop", 100.0)], t)
    assert met == [
        {
            "target": "eos vs loop",
            "workload": "wordcount",
            "kind": "ratio",
            "bound": 1.2,
            "measured": pytest.approx(1.2),
            "met": True,
        }
    ]
    assert below[0]["met"] is False
    assert below[0]["measured"] == pytest.approx(1.19)


def test_a_cost_target_is_the_share_of_throughput_given_up() -> None:
    t = (Target("cost", "kstream-alo", "kstream-alo-nocp", 0.05, ("wordcount",), "cost"),)
    cheap = check([_row("kstream-alo", 96.0), _row("kstream-alo-nocp", 100.0)], t)
    dear = check([_row("kstream-alo", 90.0), _row("kstream-alo-nocp", 100.0)], t)
    assert cheap[0]["measured"] == pytest.approx(0.04)
    assert cheap[0]["met"] is True
    assert dear[0]["measured"] == pytest.approx(0.10)
    assert dear[0]["met"] is False


def test_a_target_without_both_contenders_is_not_measured_and_never_met() -> None:
    checked = check(
        [
            _row("kstream-eos", 500.0),
            _row("eos-loop", None),  # failed or skipped
            _row("plain", 100.0, "mapfilter"),  # another workload's contender
        ]
    )
    by = _by(checked)
    loop = by["kstream EOS ÷ EOS loop", "wordcount"]
    assert loop["measured"] is None
    assert loop["met"] is None
    assert by["kstream EOS ÷ plain loop", "wordcount"]["met"] is None
    assert by["kstream EOS ÷ plain loop", "mapfilter"]["met"] is None
    # Workloads the run did not have are left out, not reported unmeasured.
    assert not any(c["workload"] == "windowed" for c in checked)
    assert all(c["met"] is None for c in checked)


def test_every_issue_target_is_checked_on_its_workloads() -> None:
    names = {
        "kstream-eos": 300.0,
        "eos-loop": 200.0,
        "plain": 400.0,
        "quix-eos": 20.0,
        "kafka-streams": 100.0,
        "kstream-alo": 330.0,
        "kstream-alo-nocp": 340.0,
    }
    run = [_row(k, v, w) for w in ("wordcount", "mapfilter", "windowed") for k, v in names.items()]
    by = _by(check(run))
    assert len(by) == sum(len(t.workloads) for t in TARGETS)
    assert by["kstream EOS ÷ EOS loop", "wordcount"]["met"] is True  # 1.5 ≥ 1.2
    assert by["kstream EOS ÷ plain loop", "mapfilter"]["met"] is False  # 0.75 < 0.8
    assert by["kstream EOS ÷ Quix Streams EOS", "windowed"]["met"] is True  # 15 ≥ 10
    assert ("kstream EOS ÷ Quix Streams EOS", "mapfilter") not in by
    assert by["kstream EOS ÷ Kafka Streams EOS v2", "wordcount"]["met"] is True  # 3 ≥ 2
    cost = by["cost of checkpoints every 1 s (at-least-once)", "wordcount"]
    assert cost["measured"] == pytest.approx(10 / 340)
    assert cost["met"] is True


def test_rows_show_bounds_values_and_verdicts() -> None:
    checked = check(
        [_row("kstream-eos", 150.0), _row("eos-loop", 200.0), _row("plain", 300.0)],
        TARGETS[:2],
    )
    table = rows(checked)
    assert table[0] == ["target", "workload", "bound", "this run", "verdict"]
    assert table[1] == ["kstream EOS ÷ EOS loop", "wordcount", "≥ 1.2x", "0.75x", "NOT met"]
    assert table[2] == ["kstream EOS ÷ plain loop", "wordcount", "≥ 0.8x", "0.50x", "NOT met"]
    cost = check(
        [_row("kstream-alo", 97.0), _row("kstream-alo-nocp", 100.0)],
        TARGETS[-1:],
    )
    assert rows(cost)[1][2:] == ["≤ 5%", "3.0%", "met"]
