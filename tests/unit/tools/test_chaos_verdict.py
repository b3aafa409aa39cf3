"""`kstream.tools.chaos.verdict`: the campaign's own definition of correct word-count output."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.tools.chaos.campaign import PARTITIONS
from kstream.tools.chaos.verdict import (
    Output,
    expected_windows,
    judge_running_count,
    judge_windowed_count,
)
from kstream.tools.chaos.workload import (
    CLOSER_KEY,
    CLOSERS,
    EVENT_KEYS,
    WINDOW_MS,
    _windows,
    word_lines,
    workload,
)

LINES = [b"a b a", b"c a", b"b"]  # a: 3, b: 2, c: 1


def outputs(pairs: list[tuple[str, str]], seen: list[float] | None = None) -> list[Output]:
    """(key, value) records in one partition, in order, seen at 0, 1, 2, ... s."""
    times = seen or [float(i) for i in range(len(pairs))]
    return [Output(0, i, k.encode(), v.encode(), times[i]) for i, (k, v) in enumerate(pairs)]


CORRECT = [("a", "1"), ("b", "1"), ("a", "2"), ("c", "1"), ("a", "3"), ("b", "2")]


def test_exactly_the_counts_in_order_is_clean() -> None:
    v = judge_running_count(LINES, outputs(CORRECT), [])
    assert v.clean
    assert v.unfinished == 0
    assert (v.inputs, v.expected, v.outputs) == (3, 6, 6)


def test_a_repeated_output_is_one_duplicate_in_the_window_it_was_seen_in() -> None:
    v = judge_running_count(LINES, outputs([*CORRECT[:3], ("a", "1"), *CORRECT[3:]]), [2.5])
    assert (v.duplicates, v.lost, v.out_of_order, v.wrong) == (1, 0, 0, 0)
    assert {w.window: w.duplicates for w in v.windows} == {-1: 0, 0: 1}


def test_a_missing_count_is_lost_in_the_window_where_the_gap_showed() -> None:
    pairs = [p for p in CORRECT if p != ("a", "2")]
    v = judge_running_count(LINES, outputs(pairs), [0.5, 3.5])
    assert (v.duplicates, v.lost, v.out_of_order, v.wrong) == (0, 1, 0, 0)
    # ("a", "3") is the first output above the gap; it was seen at 3 s, in window 0.
    assert {w.window: w.lost for w in v.windows if w.lost} == {0: 1}
    assert v.unfinished == 0


def test_a_lower_count_after_a_higher_one_is_out_of_order() -> None:
    pairs = [("a", "2"), ("a", "1"), ("a", "3"), ("b", "1"), ("b", "2"), ("c", "1")]
    v = judge_running_count(LINES, outputs(pairs), [])
    assert (v.duplicates, v.lost, v.out_of_order, v.wrong) == (0, 0, 1, 0)


def test_unknown_keys_and_non_canonical_or_impossible_values_are_wrong() -> None:
    extra = [("z", "1"), ("a", "01"), ("a", "4"), ("b", "0"), ("c", " 1"), ("b", "two")]
    v = judge_running_count(LINES, outputs([*CORRECT, *extra]), [])
    assert (v.duplicates, v.lost, v.out_of_order, v.wrong) == (0, 0, 0, len(extra))


def test_a_word_whose_last_count_is_missing_is_lost_and_unfinished() -> None:
    v = judge_running_count(LINES, outputs(CORRECT[:-1]), [])
    assert (v.lost, v.unfinished) == (1, 1)


@settings(deadline=None)  # a shared machine: no test depends on timing
@given(st.integers(0, 2**16), st.integers(1, 300), st.integers(1, 4))
def test_any_correct_run_is_clean_and_one_change_is_found(seed: int, n: int, parts: int) -> None:
    """Outputs as any job would write them (each word in one partition, counts in order,
    partitions interleaved at random) judge clean; one more or one fewer does not."""
    lines = word_lines(seed, n)
    rnd = random.Random(seed)
    counts: dict[str, int] = {}
    per_partition: dict[int, list[tuple[str, int]]] = {p: [] for p in range(parts)}
    for line in lines:
        for word in line.decode().split():
            counts[word] = counts.get(word, 0) + 1
            per_partition[hash(word) % parts].append((word, counts[word]))
    records = [
        Output(p, i, w.encode(), str(c).encode(), rnd.random() * 100)
        for p, recs in per_partition.items()
        for i, (w, c) in enumerate(recs)
    ]
    rnd.shuffle(records)
    assert judge_running_count(lines, records, [50.0]).clean
    victim = records[rnd.randrange(len(records))]
    again = Output(victim.partition, 10**6, victim.key, victim.value, 99.0)
    assert judge_running_count(lines, [*records, again], []).duplicates == 1
    fewer = judge_running_count(lines, [r for r in records if r is not victim], [])
    assert fewer.lost == 1
    assert fewer.duplicates == fewer.out_of_order == fewer.wrong == 0


# -- the windowed workload ---------------------------------------------------

SIZE = 1_000


def event(key: str, ts: int) -> bytes:
    return json.dumps({"key": key, "ts": ts, "value": "v"}).encode()


EVENTS = [event("a", 100), event("b", 900), event("a", 1_500), event("a", 1_999), b"not json"]
EXPECTED = {("a", 0): 1, ("b", 0): 1, ("a", 1_000): 2}


def result(key: str, start: int, value: int, update: bool = False) -> tuple[str, bytes]:
    d = {"key": key, "start": start, "end": start + SIZE, "value": value, "update": update}
    return key, json.dumps(d).encode()


def window_outputs(results: list[tuple[str, bytes]]) -> list[Output]:
    return [Output(0, i, k.encode(), v, float(i)) for i, (k, v) in enumerate(results)]


WINDOWS = [result("a", 0, 1), result("b", 0, 1), result("a", 1_000, 2)]


def test_expected_windows_count_events_per_key_and_window_and_skip_what_is_no_event() -> None:
    assert expected_windows(EVENTS, SIZE) == EXPECTED


def test_every_window_once_with_its_count_is_clean() -> None:
    v = judge_windowed_count(EXPECTED, SIZE, len(EVENTS), window_outputs(WINDOWS), [])
    assert v.clean
    assert v.unfinished == 0
    assert (v.inputs, v.expected, v.outputs) == (5, 3, 3)


def test_a_repeated_window_is_a_duplicate_and_a_missing_one_is_lost_and_unfinished() -> None:
    v = judge_windowed_count(
        EXPECTED, SIZE, 5, window_outputs([WINDOWS[0], WINDOWS[1], WINDOWS[0]]), [1.5]
    )
    assert (v.duplicates, v.lost, v.out_of_order, v.wrong) == (1, 1, 0, 0)
    assert v.unfinished == 1
    assert {w.window: w.duplicates for w in v.windows} == {-1: 0, 0: 1}


def test_wrong_counts_updates_bounds_keys_and_garbage_are_wrong() -> None:
    bad = [
        result("a", 0, 2),  # wrong count
        result("a", 0, 1, update=True),  # an update: final results only
        result("c", 0, 1),  # no such window
        (
            "b",
            json.dumps({"key": "b", "start": 0, "end": 500, "value": 1, "update": False}).encode(),
        ),
        ("x", WINDOWS[1][1]),  # the record's key is not the result's
        ("a", b"garbage"),
    ]
    v = judge_windowed_count(EXPECTED, SIZE, 5, window_outputs([*WINDOWS, *bad]), [])
    assert (v.duplicates, v.lost, v.out_of_order, v.wrong) == (0, 0, 0, len(bad))


def test_an_earlier_window_after_a_later_one_of_its_key_is_out_of_order() -> None:
    v = judge_windowed_count(
        EXPECTED, SIZE, 5, window_outputs([WINDOWS[2], WINDOWS[1], WINDOWS[0]]), []
    )
    assert (v.duplicates, v.lost, v.out_of_order, v.wrong) == (0, 0, 1, 0)


def test_the_windowed_input_is_never_late_and_its_closers_reach_every_partition() -> None:
    lines = workload("windowed").generate(3, 500)
    stamps = [json.loads(line)["ts"] for line in lines[:-CLOSERS]]
    assert stamps == sorted(stamps)
    assert len(set(stamps)) == len(stamps)
    closers = [json.loads(line) for line in lines[-CLOSERS:]]
    assert {c["key"] for c in closers} == {CLOSER_KEY}
    # One time: the closers' own window never closes.
    assert len({c["ts"] for c in closers}) == 1
    # Value i goes to partition i % P: the closers cover every partition of up to CLOSERS.
    assert CLOSERS >= PARTITIONS
    # Every real window ends before the closers' watermark.
    last_end = max(s for _, s in _windows(lines)) + WINDOW_MS
    assert min(c["ts"] for c in closers) > last_end
    finals = workload("windowed").final_values(lines)
    assert 0 < len(finals) <= EVENT_KEYS


def test_the_windowed_workload_knows_when_the_job_caught_up() -> None:
    wl = workload("windowed")
    lines = wl.generate(5, 300)
    finals = wl.final_values(lines)
    expected = _windows(lines)
    # Results in any order (a key's windows may be spread over partitions): what
    # counts is that each key's last window was seen, with its count.
    results = [result(key, start, n)[1] for (key, start), n in expected.items()]
    random.Random(1).shuffle(results)
    latest = {wl.output_key(None, v): v for v in results}
    assert wl.behind(finals, latest) == 0
    last = max(expected, key=lambda kw: kw[1])
    del latest[wl.output_key(None, result(*last, expected[last])[1])]
    assert wl.behind(finals, latest) == 1
    wrong = result(last[0], last[1], expected[last] + 1)[1]
    assert wl.behind(finals, {**latest, wl.output_key(None, wrong): wrong}) == 1
    assert wl.topics("in", "out") == ["in", "out", "out-late"]
    assert wl.params("in", "out")["late"] == "out-late"
