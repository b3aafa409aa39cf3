"""The seeds' tables and verdicts (pure): where a global snapshot puts the token,
the naive scheme's snapshots, which barrier q cut on, the catches per initiator,
the processes' snapshot requests, a bank snapshot's total."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.errors import ConfigurationError
from kstream.examples.seed_ring import REQUEST
from kstream.tools.seeds.demos import (
    Initiator,
    bank_snapshot,
    mark_requests,
    token_events,
    token_snapshot,
)
from kstream.tools.seeds.ring import RingSnapshot
from kstream.tools.seeds.tables import (
    MAX_SKEW,
    BankSnapshot,
    Element,
    TokenSnapshot,
    Verdict,
    caught_in_flight,
    location,
    naive_schedule,
    naive_snapshot,
    q_cut_on,
)

events = st.integers(min_value=0, max_value=400)


def test_the_token_chain_goes_p_then_p_to_q_then_q_then_q_to_p() -> None:
    assert [location(e) for e in range(9)] == [
        Element.P,  # hop 0 received (injected)
        Element.P_TO_Q,  # hop 1 sent by p
        Element.Q,  # hop 1 received
        Element.Q_TO_P,  # hop 2 sent by q
        Element.P,
        Element.P_TO_Q,
        Element.Q,
        Element.Q_TO_P,
        Element.P,
    ]
    with pytest.raises(ValueError, match="starts at event 0"):
        location(-1)


@given(events)
def test_both_processes_recording_at_one_moment_hold_the_token_once(e: int) -> None:
    snapshot = naive_snapshot("n", e, e)
    assert snapshot.tokens == 1
    assert snapshot.verdict is Verdict.ONCE


@given(events, events)
def test_a_naive_snapshot_counts_what_each_process_sees_at_its_own_moment(p: int, q: int) -> None:
    s = naive_snapshot("n", p, q)
    # p records p and q->p at its moment, q records q and p->q at its own.
    assert s.p_holds + s.q_to_p == int(location(p) in (Element.P, Element.Q_TO_P))
    assert s.q_holds + s.p_to_q == int(location(q) in (Element.Q, Element.P_TO_Q))
    assert s.tokens in (0, 1, 2)


def test_the_seeds_naive_failures() -> None:
    # p records after sending, q before p sent: the token vanishes (seed 000).
    vanished = naive_snapshot("n", 1, 0)
    assert (vanished.tokens, vanished.verdict) == (0, Verdict.VANISHED)
    assert dict(vanished.rows()) == {
        Element.P: "s0",
        Element.Q: "s0",
        Element.P_TO_Q: "empty",
        Element.Q_TO_P: "empty",
    }
    # p records while holding it, q after receiving it: it doubles.
    doubled = naive_snapshot("n", 0, 2)
    assert (doubled.tokens, doubled.verdict) == (2, Verdict.DOUBLED)


@given(st.integers(min_value=3, max_value=300), st.integers(0, 60), st.integers(0, 2**32))
def test_a_naive_schedule_starts_with_both_failures_and_stays_in_the_run(
    n_events: int, snapshots: int, seed: int
) -> None:
    pairs = naive_schedule(n_events, snapshots, seed)
    assert len(pairs) == snapshots
    assert pairs == naive_schedule(n_events, snapshots, seed)
    assert all(0 <= p < n_events and 0 <= q < n_events for p, q in pairs)
    verdicts = [naive_snapshot("n", p, q).verdict for p, q in pairs]
    assert verdicts[:2] == [Verdict.VANISHED, Verdict.DOUBLED][:snapshots]


@given(st.integers(min_value=3, max_value=300), st.integers(0, 2**32))
def test_naive_clocks_disagree_by_at_most_twice_the_skew(n_events: int, seed: int) -> None:
    for p, q in naive_schedule(n_events, 30, seed)[2:]:
        assert abs(p - q) <= 2 * MAX_SKEW


def test_a_naive_schedule_needs_a_token_that_went_around() -> None:
    with pytest.raises(ValueError, match="3 token events"):
        naive_schedule(2, 5, 0)


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
