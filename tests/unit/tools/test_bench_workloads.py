"""The benchmark suite's input generator and output check (pure logic)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.workloads import Tally, expected, generate, keep


def _correct_output(lines: list[str], workload: str, seed: int) -> list[tuple[bytes, bytes]]:
    """A correct output: per word in order, words interleaved as a partitioned topic may."""
    counts: dict[str, int] = {}
    out = []
    for line in lines:
        for word in line.split():
            if workload == "wordcount":
                counts[word] = counts.get(word, 0) + 1
                out.append((word.encode(), str(counts[word]).encode()))
            elif keep(word):
                out.append((word.encode(), word.upper().encode()))
    # Readers see partitions interleaved; only per-key order is kept, and the check
    # must not depend on it: shuffle everything.
    random.Random(seed).shuffle(out)
    return out


@given(st.integers(1, 3000), st.integers(0, 2**32))
@settings(max_examples=30, deadline=None)
def test_generate_yields_exactly_the_words_asked_for(words: int, seed: int) -> None:
    lines = generate(words, seed)
    assert sum(len(line.split()) for line in lines) == words
    assert generate(words, seed) == lines


@given(
    st.integers(1, 400),
    st.integers(0, 1000),
    st.sampled_from(["wordcount", "mapfilter"]),
)
@settings(max_examples=50, deadline=None)
def test_correct_output_passes_and_any_single_fault_is_named(
    words: int, seed: int, workload: str
) -> None:
    lines = generate(words, seed)
    expect = expected(lines, workload)  # type: ignore[arg-type]
    good = _correct_output(lines, workload, seed)
    tally = Tally(expect)
    for k, v in good:
        tally.add(k, v)
    assert tally.complete
    assert tally.problems() == []
    if not good:
        return
    rnd = random.Random(seed)
    i = rnd.randrange(len(good))
    key, value = good[i]
    faults = {
        "lost": good[:i] + good[i + 1 :],
        "repeated": [*good, good[i]],
        "wrong value": [
            *good[:i],
            (key, b"0" if workload == "wordcount" else b"X"),
            *good[i + 1 :],
        ],
        "unknown key": [*good[:i], (b"nosuchword", value), *good[i + 1 :]],
    }
    for name, records in faults.items():
        bad = Tally(expect)
        for k, v in records:
            bad.add(k, v)
        assert bad.problems(), name


def test_plain_loop_output_is_checked_as_ones() -> None:
    lines = ["a b a", "b a"]
    expect = expected(lines, "wordcount", ones=True)
    tally = Tally(expect)
    for word in ["a", "b", "a", "b", "a"]:
        tally.add(word.encode(), b"1")
    assert tally.problems() == []
    counting = Tally(expected(lines, "wordcount"))
    for word in ["a", "b", "a", "b", "a"]:
        counting.add(word.encode(), b"1")
    assert counting.problems() == [
        "a: 3 outputs, expected 1..3 (2 missing, 2 repeated)",
        "b: 2 outputs, expected 1..2 (1 missing, 1 repeated)",
    ]


def test_mapfilter_drops_words_ending_in_an_odd_digit() -> None:
    expect = expected(["w0001 w0002 the a w0002"], "mapfilter")
    assert expect.per_key == {b"w0002": 2, b"the": 1, b"a": 1}
