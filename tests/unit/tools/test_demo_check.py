"""The demo's word-count figures come from the audit's definition (no Kafka)."""

from __future__ import annotations

from kstream.testing import ReadRecord
from kstream.tools.demo import check_running_counts

LINES = ["a b a", "b c"]  # a: 2, b: 2, c: 1


def _out(*pairs: tuple[int, str, str]) -> list[ReadRecord]:
    return [
        ReadRecord("out", partition, offset, word.encode(), count.encode())
        for offset, (partition, word, count) in enumerate(pairs)
    ]


def test_an_exact_output() -> None:
    check = check_running_counts(
        LINES, _out((0, "a", "1"), (0, "b", "1"), (0, "a", "2"), (0, "b", "2"), (0, "c", "1"))
    )
    assert (check.words, check.outputs) == (3, 5)
    assert check.output_exact


def test_a_replay_is_counted_as_duplicates_not_also_out_of_order() -> None:
    check = check_running_counts(
        LINES,
        _out((0, "a", "1"), (0, "a", "2"), (0, "a", "1"), (0, "b", "1"), (0, "b", "2")),
    )
    assert (check.duplicates, check.out_of_order, check.missing) == (1, 0, 1)  # c's 1
    assert check.wrong_final == ["c"]
    assert not check.state_exact


def test_wrong_finals_name_words_with_a_missing_or_excess_count_then_strangers() -> None:
    check = check_running_counts(
        LINES,
        _out(
            (0, "a", "1"), (0, "b", "1"), (0, "b", "2"), (0, "b", "3"), (0, "c", "1"), (0, "z", "1")
        ),
    )
    assert check.wrong_final == ["a", "b", "z"]
    assert check.missing == 1  # a's 2


def test_order_is_per_partition() -> None:
    check = check_running_counts(["a a"], _out((0, "a", "2"), (0, "a", "1")))
    assert check.out_of_order == 1
    assert check.state_exact  # the highest count is right
