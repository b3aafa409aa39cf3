"""The decision whether a checkpoint can still be resumed from the job's internal topics."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.protocol.resume_check import (
    ADVICE,
    Need,
    StoredCheckpoint,
    channel_needs,
    lost_history,
    marker_need,
    refusal,
    unmet,
)

# -- the control topic ---------------------------------------------------------


def test_no_checkpoint_on_disk_needs_no_history() -> None:
    assert lost_history(None, (), 0) is None


def test_a_checkpoint_on_disk_with_an_empty_control_topic_lost_its_history() -> None:
    why = lost_history(StoredCheckpoint(7, 3), (), 0)
    assert why is not None
    assert why.startswith("no longer holds the job's checkpoint history (deleted?)")
    assert "generation 3" in why


def test_a_completion_in_the_control_topic_is_its_history() -> None:
    assert lost_history(StoredCheckpoint(7, 3), (5,), 0) is None


@pytest.mark.parametrize(("started", "lost"), [(0, True), (2, True), (3, False), (4, False)])
def test_a_checkpoint_stored_but_never_completed_has_its_generation_recover(
    started: int, lost: bool
) -> None:
    # The runner died before it wrote the completion: the recover that opened the
    # checkpoint's generation (or a later one) is there, the history is not lost.
    assert (lost_history(StoredCheckpoint(7, 3), (), started) is not None) is lost


def test_a_checkpoint_whose_snapshots_name_no_generation_needs_some_recover() -> None:
    assert lost_history(StoredCheckpoint(7, 0), (), 0) is not None
    assert lost_history(StoredCheckpoint(7, 0), (), 1) is None


# -- what a snapshot reads ---------------------------------------------------------


def test_a_channel_is_read_from_its_recorded_position() -> None:
    needs = channel_needs({"t.s1": {1: 40, 0: 12}}, {})
    assert needs == [Need("t.s1", 0, 12, 12), Need("t.s1", 1, 40, 40)]


def test_recorded_channel_state_is_read_through_its_replay_windows() -> None:
    needs = channel_needs({"t.s1": {0: 12}}, {"t.s1": {0: [[30, 2], [25, 1]]}})
    assert needs == [Need("t.s1", 0, 12, 30)]


def test_a_sink_without_kept_epochs_reads_no_markers() -> None:
    kept: list[dict[str, object]] = [
        {},
        {"pending": []},
        {"pending": [], "marker": [3, 90]},
        {"state": "a sink of another kind"},
    ]
    for meta in kept:
        assert marker_need("t.commits", 3, meta, markers=True) is None
        assert marker_need("t.commits", 3, meta, markers=False) is None


def test_a_sink_that_declares_no_markers_reads_none_whatever_it_kept() -> None:
    """A sink confirming its epochs in its destination reads nothing of the
    commit-marker topic, even with kept epochs that look like epoch numbers (a
    chaos campaign met every Delta and Iceberg resume refused when they were
    taken for the Kafka sink's: that partition stays empty)."""
    kept = {"pending": [8, 9], "marker": [3, 90]}
    assert marker_need("t.commits", 3, kept, markers=False) is None


def test_kept_epochs_need_their_markers_after_the_newest_committed_one() -> None:
    need = marker_need("t.commits", 3, {"pending": [8, 9], "marker": [3, 90]}, markers=True)
    assert need == Need("t.commits", 3, 90, 93, "commit markers")


def test_kept_epochs_without_a_committed_marker_need_their_own() -> None:
    unconfirmed = Need("t.commits", 3, None, 1, "commit markers")
    assert marker_need("t.commits", 3, {"pending": [8]}, markers=True) == unconfirmed
    # A marker of another partition (or malformed) is no position in this one.
    assert marker_need("t.commits", 3, {"pending": [8], "marker": [2, 90]}, markers=True) == (
        unconfirmed
    )
    assert marker_need("t.commits", 3, {"pending": [8], "marker": [3, "x"]}, markers=True) == (
        unconfirmed
    )


# -- the decision ----------------------------------------------------------------


def test_needs_met_by_the_topics_are_no_problem() -> None:
    needs = [Need("t.s1", 0, 12, 30), Need("t.commits", 1, 5, 8, "commit markers")]
    marks = {"t.s1": {0: (12, 30)}, "t.commits": {0: (0, 0), 1: (0, 100)}}
    assert unmet(needs, marks) is None


def test_a_need_that_reads_nothing_is_met_by_a_missing_topic() -> None:
    assert unmet([Need("t.s1", 0, 0, 0), Need("t.commits", 0, None, 0)], {"t.s1": None}) is None


def test_a_missing_topic_is_named() -> None:
    assert unmet([Need("t.s1", 0, 12, 12)], {"t.s1": None}) == (
        "t.s1",
        "no longer exists (deleted?)",
    )
    assert unmet([Need("t.s1", 0, 12, 12)], {}) == ("t.s1", "no longer exists (deleted?)")


def test_a_missing_partition_is_named() -> None:
    assert unmet([Need("t.s1", 3, 12, 12)], {"t.s1": {0: (0, 99)}}) == (
        "t.s1",
        "has no partition 3",
    )


def test_a_topic_created_again_ends_before_what_the_checkpoint_reads() -> None:
    assert unmet([Need("t.s1", 1, 12, 12)], {"t.s1": {0: (0, 0), 1: (0, 0)}}) == (
        "t.s1",
        "partition 1 ends at offset 0, but the checkpoint resumes reading it at offset 12 "
        "(deleted and created again?)",
    )
    assert unmet([Need("t.s1", 1, 12, 30)], {"t.s1": {0: (0, 0), 1: (0, 29)}}) == (
        "t.s1",
        "partition 1 ends at offset 29, but the checkpoint reads its records up to offset 30 "
        "(deleted and created again?)",
    )
    assert unmet([Need("t.c", 0, None, 2, "commit markers")], {"t.c": {0: (0, 1)}}) == (
        "t.c",
        "partition 0 ends at offset 1, but the checkpoint reads its commit markers up to "
        "offset 2 (deleted and created again?)",
    )


def test_a_topic_cut_by_retention_starts_after_what_the_checkpoint_reads() -> None:
    assert unmet([Need("t.s1", 0, 12, 30)], {"t.s1": {0: (13, 50)}}) == (
        "t.s1",
        "partition 0 starts at offset 13, but the checkpoint reads its records from offset 12 "
        "(deleted by retention?)",
    )
    # Without a first offset it needs, where the partition starts does not matter.
    assert unmet([Need("t.c", 0, None, 2, "commit markers")], {"t.c": {0: (40, 50)}}) is None


def test_the_first_unmet_need_in_topic_and_partition_order_is_named() -> None:
    needs = [Need("t.s2", 0, 5, 5), Need("t.s1", 1, 5, 5), Need("t.s1", 0, 1, 1)]
    marks = {"t.s1": {0: (0, 9), 1: (0, 0)}, "t.s2": None}
    assert unmet(needs, marks) == (
        "t.s1",
        "partition 1 ends at offset 0, but the checkpoint resumes reading it at offset 5 "
        "(deleted and created again?)",
    )


@given(
    first=st.integers(0, 50),
    extra=st.integers(0, 50),
    low=st.integers(0, 120),
    span=st.integers(0, 120),
)
def test_a_need_is_met_exactly_when_the_partition_holds_its_offsets(
    first: int, extra: int, low: int, span: int
) -> None:
    need = Need("t.s1", 0, first, first + extra)
    # A subtask that never read the partition (position 0) needs nothing of it.
    held = (first, extra) == (0, 0) or (low <= first and low + span >= first + extra)
    assert (unmet([need], {"t.s1": {0: (low, low + span)}}) is None) is held


def test_the_refusal_is_one_line_naming_the_topic_and_the_way_on() -> None:
    line = refusal("j", 7, "kstream.j.s1", "no longer exists (deleted?)")
    assert line == (
        f"job j cannot resume checkpoint 7: internal topic kstream.j.s1 no longer exists "
        f"(deleted?); {ADVICE}"
    )
    assert "\n" not in line
    assert "--fresh" in line
