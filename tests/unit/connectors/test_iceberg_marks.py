"""The Iceberg sink's pure decisions: reading a subtask's newest mark from the
summaries of a branch's lineage, and what a commit or a recovery appends."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.connectors.iceberg.marks import (
    EPOCH_KEY,
    GENERATION_KEY,
    SINK_KEY,
    Mark,
    newest_mark,
    plan,
    summary,
)
from kstream.errors import ProducerFencedError

H = "kstream:job:iceberg:db.t:s1-0"


def test_a_summary_reads_back_as_its_mark() -> None:
    assert newest_mark([summary(H, 7, 3)], H) == Mark(7, 3)
    assert newest_mark([summary(H, None, 2)], H) == Mark(None, 2)


def test_the_newest_mark_of_the_subtask_wins_over_older_and_other_subtasks() -> None:
    lineage = [
        {"added-records": "5"},
        summary(H + "0", 99, 9),  # s1-00 is another subtask: compared whole
        summary(H, 12, 2),
        summary(H, 8, 1),
    ]
    assert newest_mark(lineage, H) == Mark(12, 2)
    assert newest_mark(lineage, "kstream:job:iceberg:db.t:s1-1") is None


@pytest.mark.parametrize(
    "bad",
    [
        {SINK_KEY: H, GENERATION_KEY: "x"},
        {SINK_KEY: H, GENERATION_KEY: "+1"},
        {SINK_KEY: H, GENERATION_KEY: "٣"},
        {SINK_KEY: H, GENERATION_KEY: "1", EPOCH_KEY: " 4"},
        {SINK_KEY: H},
    ],
)
def test_marks_that_do_not_parse_are_passed_over(bad: dict[str, str]) -> None:
    assert newest_mark([bad, summary(H, 3, 1)], H) == Mark(3, 1)


def test_a_newer_generations_mark_fences_the_commit() -> None:
    with pytest.raises(ProducerFencedError, match="generation 5 committed"):
        plan(Mark(4, 5), [6], 6, 4, fence=False)


def test_a_recovery_fences_once_per_generation_even_without_files() -> None:
    assert plan(None, [], None, 1, fence=True).snapshot
    assert plan(Mark(3, 1), [], None, 2, fence=True).snapshot
    assert not plan(Mark(3, 2), [], None, 2, fence=True).snapshot
    assert not plan(Mark(3, 1), [], 9, 1, fence=False).snapshot


epochs = st.lists(st.integers(0, 50), max_size=8)


@given(
    committed=st.one_of(st.none(), st.integers(0, 50)),
    pending=epochs,
    upto=st.one_of(st.none(), st.integers(0, 50)),
    mark_generation=st.integers(1, 4),
    generation=st.integers(1, 4),
    fence=st.booleans(),
)
def test_each_epoch_is_appended_once_and_in_order(
    committed: int | None,
    pending: list[int],
    upto: int | None,
    mark_generation: int,
    generation: int,
    fence: bool,
) -> None:
    mark = Mark(committed, mark_generation)
    if mark_generation > generation:
        with pytest.raises(ProducerFencedError):
            plan(mark, pending, upto, generation, fence=fence)
        return
    p = plan(mark, pending, upto, generation, fence=fence)
    due = {e for e in pending if upto is None or e <= upto}
    # Exactly the due epochs the table does not record yet, oldest first, once each.
    assert list(p.epochs) == sorted(e for e in due if committed is None or e > committed)
    # The recorded epoch never goes back, and covers what this snapshot appends.
    assert p.epoch == (max(p.epochs) if p.epochs else committed)
    if committed is not None and p.epoch is not None:
        assert p.epoch >= committed
    # A snapshot whenever there is something to append, or a fence to raise.
    assert p.snapshot == (bool(p.epochs) or (fence and mark_generation != generation))
    # Deciding again on the mark this snapshot leaves appends nothing more.
    again = plan(Mark(p.epoch, generation), pending, upto, generation, fence=fence)
    assert again.epochs == ()
    assert not again.snapshot
