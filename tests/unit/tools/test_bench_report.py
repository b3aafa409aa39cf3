"""The benchmark suite's figures: ratios against the two baselines, failed rows without figures."""

from __future__ import annotations

from benchmarks.report import markdown, ratios
from benchmarks.suite import Result


def _result(key: str, seconds: float | None, workload: str = "wordcount") -> Result:
    return Result(
        workload=workload,  # type: ignore[arg-type]
        key=key,
        contender=key,
        processes=1,
        processes_note="1",
        status="ok" if seconds else "failed",
        reason="" if seconds else "wrong output: a: 2 outputs, expected 1..1",
        input_words=1000,
        outputs_expected=1000,
        outputs_read=1000,
        verified=bool(seconds),
        seconds=seconds,
        flowing_seconds=seconds / 2 if seconds else None,
        load_at_start=1.0,
    )


def test_ratios_are_throughput_ratios_within_one_workload() -> None:
    rows = ratios(
        [
            _result("plain", 1.0),
            _result("kstream-eos", 2.0),
            _result("eos-loop", 4.0),
            _result("quix-eos", None),
            # Another workload's baselines must not be used.
            _result("plain", 10.0, "mapfilter"),
        ]
    )
    by = {(r["workload"], r["key"]): r for r in rows}
    assert by["wordcount", "kstream-eos"]["ratio_vs_plain"] == 0.5
    assert by["wordcount", "eos-loop"]["ratio_vs_plain"] == 0.25
    assert by["wordcount", "eos-loop"]["ratio_vs_kstream_eos"] == 0.5
    assert by["wordcount", "plain"]["ratio_vs_kstream_eos"] == 2.0
    assert by["wordcount", "quix-eos"]["ratio_vs_plain"] is None
    assert by["wordcount", "quix-eos"]["words_per_s"] is None
    assert by["mapfilter", "plain"]["ratio_vs_plain"] == 1.0
    assert by["mapfilter", "plain"]["ratio_vs_kstream_eos"] is None
    assert by["wordcount", "plain"]["flowing_words_per_s"] == 2000.0


def test_windowed_rows_are_compared_with_the_same_contender_s_wordcount() -> None:
    rows = ratios(
        [
            _result("kstream-eos", 2.0),
            _result("plain", 1.0),
            _result("kstream-eos", 4.0, "windowed"),
            _result("plain", 1.0, "windowed"),
            _result("eos-loop", 1.0, "windowed"),
        ]
    )
    by = {(r["workload"], r["key"]): r for r in rows}
    assert by["windowed", "kstream-eos"]["ratio_vs_own_wordcount"] == 0.5
    assert by["windowed", "plain"]["ratio_vs_own_wordcount"] == 1.0
    # No word count of its own in the run: no ratio rather than another's.
    assert by["windowed", "eos-loop"]["ratio_vs_own_wordcount"] is None
    assert "ratio_vs_own_wordcount" not in by["wordcount", "kstream-eos"]
    text = markdown(
        {
            "machine": {"cores": 2, "cpu": "x", "memory_gb": 1.0, "os": "y", "python": "3"},
            "config": {"words": 1000, "partitions": 3},
            "figures": {"throughput": rows},
        }
    )
    assert "| windowed | kstream-eos | 1 | 250 | 500 | 0.25 | 1.00 | 0.50 |" in text


def test_markdown_names_the_machine_and_the_failure() -> None:
    results = [_result("plain", 1.0), _result("quix-eos", None)]
    doc = {
        "machine": {"cores": 2, "cpu": "x", "memory_gb": 1.0, "os": "y", "python": "3"},
        "config": {"words": 1000, "partitions": 3},
        "figures": {"throughput": ratios(results)},
    }
    text = markdown(doc)
    assert "2 cores (x)" in text
    assert "| wordcount | plain | 1 | 1,000 | 2,000 | 1.00 | — | — |" in text
    assert "failed: wrong output" in text
