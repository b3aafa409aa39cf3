"""The seeds' tables and verdicts (pure): where a global snapshot puts the token,
which barrier q cut on, the catches per initiator,
the processes' snapshot requests, a bank snapshot's total."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.errors import ConfigurationError
from kstream.examples.seed_ring import REQUEST
from kstream.protocol.checkpoint_history import CheckpointRecord
from kstream.tools.seeds.bank import bank_snapshot
from kstream.tools.seeds.demos import Initiator, mark_requests
from kstream.tools.seeds.ring import RingSnapshot
from kstream.tools.seeds.tables import (
    BankSnapshot,
    Element,
    TokenSnapshot,
    Verdict,
    caught_in_flight,
    overlapping,
    q_cut_on,
)
from kstream.tools.seeds.token_ring import token_events, token_snapshot


def test_verdicts_count_every_place_the_token_is() -> None:
    assert TokenSnapshot("c", p_holds=False, q_holds=False, q_to_p=1).verdict is Verdict.ONCE
    assert TokenSnapshot("c", p_holds=False, q_holds=False).verdict is Verdict.VANISHED
    assert TokenSnapshot("c", p_holds=True, q_holds=False, p_to_q=1).verdict is Verdict.DOUBLED
    # A token recorded outside the table still counts.
    hidden = TokenSnapshot("c", p_holds=True, q_holds=False, elsewhere=1)
    assert hidden.verdict is Verdict.DOUBLED
    assert dict(hidden.rows())[Element.ELSEWHERE] == "token"
    two = TokenSnapshot("c", p_holds=False, q_holds=False, p_to_q=2)
    assert dict(two.rows())[Element.P_TO_Q] == "2 tokens"
    assert two.in_channel_state
    assert not TokenSnapshot("c", p_holds=True, q_holds=False).in_channel_state


@pytest.mark.parametrize(
    ("own", "marker", "cut"),
    [
        (True, False, "own source"),
        (False, True, "p's marker"),
        (True, True, "both, aligned"),
        (False, False, "unknown"),
    ],
)
def test_which_barrier_q_cut_on(own: bool, marker: bool, cut: str) -> None:
    assert q_cut_on(own, marker) == cut


def test_catches_are_counted_per_initiator_and_channel() -> None:
    snapshots = [
        TokenSnapshot("1", p_holds=False, q_holds=False, p_to_q=1, started_by="q"),
        TokenSnapshot("2", p_holds=False, q_holds=False, q_to_p=1, started_by="q"),
        TokenSnapshot("3", p_holds=False, q_holds=False, p_to_q=1, started_by="q"),
        TokenSnapshot("4", p_holds=False, q_holds=False, q_to_p=1, started_by="p"),
        TokenSnapshot("5", p_holds=True, q_holds=False, started_by="p"),
        TokenSnapshot("6", p_holds=False, q_holds=True, started_by="coordinator"),
    ]
    assert caught_in_flight(snapshots) == {
        "q": {Element.P_TO_Q: 2, Element.Q_TO_P: 1},
        "p": {Element.Q_TO_P: 1},
        "coordinator": {},
    }


@given(
    n=st.integers(min_value=0, max_value=300),
    every=st.floats(min_value=0.5, max_value=40),
    seed=st.integers(min_value=0, max_value=1000),
    turns=st.sampled_from([1, 2]),
)
def test_requests_mark_one_record_per_turn_and_keep_every_value(
    n: int, every: float, seed: int, turns: int
) -> None:
    values = [["v", i] for i in range(n)]
    size = max(2, round(every))
    for turn in range(turns):
        marked = mark_requests(values, every, seed, "q", turn, turns)
        assert [v[REQUEST] if isinstance(v, dict) else v for v in marked] == values
        at = [i for i, v in enumerate(marked) if isinstance(v, dict)]
        assert 0 not in at  # p's first record (the token) is never a request
        # One in each of its turns, in the turn's first half (past its first record).
        assert [i // size for i in at] == list(range(turn, n // size + 1, turns))[: len(at)]
        assert all(1 <= i % size <= size // 2 for i in at)
        assert len(at) >= (n // size - turn + turns - 1) // turns  # every full turn requests
        assert mark_requests(values, every, seed, "q", turn, turns) == marked  # same on replay


def test_p_and_q_take_turns_half_a_turn_apart_at_least() -> None:
    values = list(range(400))
    p = [i for i, v in enumerate(mark_requests(values, 10, 1, "p", 0, 2)) if isinstance(v, dict)]
    q = [i for i, v in enumerate(mark_requests(values, 10, 1, "q", 1, 2)) if isinstance(v, dict)]
    assert len(p) == len(q) == 20
    assert all(abs(a - b) >= 5 for a in p for b in q)


def test_initiators_parse_and_say_who_requests() -> None:
    assert Initiator.parse("both").starts("p")
    assert Initiator.parse("both").starts("q")
    assert Initiator.parse("q").starts("q")
    assert not Initiator.parse("q").starts("p")
    assert not Initiator.parse("coordinator").starts("p")
    with pytest.raises(ConfigurationError, match="--initiator must be one of p, q, both"):
        Initiator.parse("r")


def ring_snapshot(
    p_state: dict[str, object],
    q_state: dict[str, object],
    channels: dict[str, list[object]],
    source_offset: int = 5,
) -> RingSnapshot:
    return RingSnapshot(7, p_state, q_state, channels, "q", source_offset, "own source")


def test_a_checkpoint_of_the_token_ring_reads_as_the_seeds_table() -> None:
    s = token_snapshot(ring_snapshot({}, {}, {Element.Q_TO_P: ["tick", ["token", 4]]}))
    assert (s.p_holds, s.q_holds, s.p_to_q, s.q_to_p, s.elsewhere) == (False, False, 0, 1, 0)
    assert s.verdict is Verdict.ONCE
    held = token_snapshot(ring_snapshot({"token": [3, 1]}, {}, {}))
    assert held.p_holds
    assert held.verdict is Verdict.ONCE
    # Before p read the token from its source (offset 0, or Kafka's "beginning", -2).
    for offset in (0, -2):
        unread = token_snapshot(ring_snapshot({}, {}, {}, source_offset=offset))
        assert (unread.elsewhere, unread.verdict) == (1, Verdict.ONCE)
    lost = token_snapshot(ring_snapshot({}, {}, {"kstream.j.s2[0]": [["token", 1]]}))
    assert lost.elsewhere == 1
    # A snapshot that reached p through the loop first records p's input channel,
    # where the token is still as p's source wrote it.
    recorded = token_snapshot(ring_snapshot({}, {}, {"kstream.j.s1[0]": ["token", "tick"]}))
    assert (recorded.elsewhere, recorded.verdict) == (1, Verdict.ONCE)


def test_the_token_chain_of_a_checkpoint() -> None:
    assert token_events(ring_snapshot({"token": [0, 2]}, {}, {})) == 1
    assert token_events(ring_snapshot({}, {"token": [3, 1]}, {})) == 7
    assert token_events(ring_snapshot({}, {}, {Element.P_TO_Q: [["token", 5]]})) == 10


def test_a_bank_snapshot_totals_balances_and_credits_in_flight() -> None:
    s = bank_snapshot(
        ring_snapshot(
            {"X1": 900},
            {"Y2": 1050},
            {Element.P_TO_Q: [["credit", "Z2", 100]], Element.Q_TO_P: []},
        )
    )
    assert s.held == 6000 - 100 + 50
    assert s.moving == 100
    assert s.total == 6050
    assert s.caught_in_flight
    assert s.lines() == [
        "P1 (p): X1=900, Y1=1000, Z1=1000",
        "P2 (q): X2=1000, Y2=1050, Z2=1000",
        "p→q: M(credit Z2 100)",
        "q→p: empty",
    ]
    assert not BankSnapshot("c", {"P1": {"X1": 1}}).caught_in_flight


def _done(checkpoint: int, by: str, at: float, lasted: float) -> CheckpointRecord:
    return CheckpointRecord(
        checkpoint, 1, "completed", triggered_at=at, duration_s=lasted, started_by=by
    )


def test_overlapping_counts_pairs_of_two_initiators_in_flight_together() -> None:
    p1, q1 = _done(1, "s0-0", 0.0, 2.0), _done(2, "s2-0", 1.0, 2.0)
    assert overlapping([p1, q1]) == 1
    # After the other completed, by the same initiator, or by the coordinator: no pair.
    assert overlapping([p1, _done(3, "s2-0", 2.0, 1.0)]) == 0
    assert overlapping([p1, _done(3, "s0-0", 1.0, 1.0)]) == 0
    assert overlapping([p1, _done(3, "", 1.0, 1.0)]) == 0
    # Only completed ones count.
    aborted = CheckpointRecord(4, 1, "aborted", triggered_at=1.0, duration_s=1.0, started_by="s2-0")
    assert overlapping([p1, aborted]) == 0
    assert overlapping([p1, q1, _done(5, "s2-0", 0.5, 0.1)]) == 2
