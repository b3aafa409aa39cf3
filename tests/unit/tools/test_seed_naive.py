"""The naive scheme's records and composition (pure): a channel's state is what its
receiver recorded, from its consumed messages on, below the end offset it saw."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.errors import CheckpointError
from kstream.tools.seeds.naive import (
    LocalRecord,
    Message,
    compose,
    load_records,
    recording_ticks,
    records_dir,
    store_record,
)
from kstream.tools.seeds.tables import Element, Verdict


def rec(
    process: str, *, holds: bool, consumed: int, end: int, sent: int, seq: int = 0
) -> LocalRecord:
    return LocalRecord(
        process, seq, 10, holds, 1 if holds else None, "ch", 0, consumed, end, sent, 1
    )


# p→q holds hop 1 at offset 0 and hop 3 at offset 2; q→p holds hop 2 at offset 0.
P_TO_Q = [Message(0, ["token", 1]), Message(2, ["token", 3])]
Q_TO_P = [Message(0, ["token", 2])]


def test_p_after_sending_and_q_before_it_arrived_lose_the_token() -> None:
    # Seed 000: p recorded s0 having sent hop 1; q recorded s0 with p→q still empty
    # in the log (end 0): the token is in no one's record.
    p = rec("p", holds=False, consumed=0, end=0, sent=1)
    q = rec("q", holds=False, consumed=0, end=0, sent=0)
    (row,) = compose([p], [q], P_TO_Q, Q_TO_P)
    assert row.p_to_q == row.q_to_p == ()
    assert row.snapshot.verdict is Verdict.VANISHED
    assert dict(row.snapshot.rows())[Element.P_TO_Q] == "empty"


def test_p_while_holding_and_q_after_receiving_double_the_token() -> None:
    p = rec("p", holds=True, consumed=0, end=0, sent=0)
    q = rec("q", holds=True, consumed=1, end=1, sent=0)
    (row,) = compose([p], [q], P_TO_Q, Q_TO_P)
    assert row.snapshot.verdict is Verdict.DOUBLED


def test_a_message_in_the_log_and_not_consumed_is_in_the_receivers_channel_state() -> None:
    p = rec("p", holds=False, consumed=0, end=0, sent=1)
    q = rec("q", holds=False, consumed=0, end=1, sent=0)
    (row,) = compose([p], [q], P_TO_Q, Q_TO_P)
    assert row.p_to_q == (P_TO_Q[0],)
    assert row.snapshot.verdict is Verdict.ONCE


def test_the_end_offset_bounds_the_channel_state_by_offset_not_by_count() -> None:
    # Batches: two messages can share an offset; the end is an offset of the log.
    messages = [Message(0, ["token", 1]), Message(0, ["token", 3]), Message(5, ["token", 5])]
    q = rec("q", holds=False, consumed=1, end=5, sent=0)
    p = rec("p", holds=False, consumed=0, end=0, sent=0)
    (row,) = compose([p], [q], messages, [])
    assert row.p_to_q == (messages[1],)


def test_records_pair_by_number_up_to_the_shorter() -> None:
    ps = [rec("p", holds=False, consumed=0, end=0, sent=0, seq=i) for i in range(3)]
    qs = [rec("q", holds=False, consumed=0, end=0, sent=0, seq=i) for i in range(2)]
    rows = compose(ps, qs, [], [])
    assert [(r.p.seq, r.q.seq) for r in rows] == [(0, 0), (1, 1)]
    assert [r.label for r in rows] == ["naive 1", "naive 2"]


@given(seed=st.integers(0, 1000), every=st.integers(1, 10), ticks=st.integers(0, 300))
def test_a_clock_is_seeded_increasing_and_within_the_ticks(
    seed: int, every: int, ticks: int
) -> None:
    at = recording_ticks(seed, "p", every, ticks)
    assert at == recording_ticks(seed, "p", every, ticks)
    assert all(0 < a < b <= ticks for a, b in pairwise(at))
    assert all(1 <= t <= ticks for t in at)


def test_records_are_stored_and_loaded_in_order(tmp_path: Path) -> None:
    records = [rec("q", holds=i % 2 == 0, consumed=i, end=i, sent=i, seq=i) for i in range(12)]
    for r in reversed(records):
        store_record(tmp_path, r)
    assert load_records(tmp_path, "q") == records
    assert load_records(tmp_path, "p") == []


def test_a_damaged_record_is_refused_naming_the_file(tmp_path: Path) -> None:
    store_record(tmp_path, rec("p", holds=False, consumed=0, end=0, sent=0))
    path = next(records_dir(tmp_path, "p").glob("*.json"))
    path.write_text('{"process": "p"}')
    with pytest.raises(CheckpointError, match=f"{path} is unreadable"):
        load_records(tmp_path, "p")
