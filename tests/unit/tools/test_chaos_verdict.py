"""`kstream.tools.chaos.verdict`: the campaign's own definition of correct word-count output."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kstream.tools.chaos.verdict import Output, judge_running_count
from kstream.tools.chaos.workload import word_lines

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
