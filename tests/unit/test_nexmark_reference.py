"""The Nexmark references on hand-made events, and the checker's verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.nexmark import check, queries, reference
from kstream.errors import ConfigurationError


def bid(auction: int, price: int, ts: int, bidder: int = 1) -> dict[str, Any]:
    b = {
        "auction": auction,
        "bidder": bidder,
        "price": price,
        "channel": "c",
        "url": "u",
        "dateTime": ts,
        "extra": "",
    }
    return {"event_type": 2, "person": None, "auction": None, "bid": b}


def person(pid: int, state: str) -> dict[str, Any]:
    p = {
        "id": pid,
        "name": f"n{pid}",
        "emailAddress": "",
        "creditCard": "",
        "city": "x",
        "state": state,
        "dateTime": 0,
        "extra": "",
    }
    return {"event_type": 0, "person": p, "auction": None, "bid": None}


def auction(aid: int, seller: int, category: int) -> dict[str, Any]:
    a = {
        "id": aid,
        "itemName": "",
        "description": "",
        "initialBid": 1,
        "reserve": 2,
        "dateTime": 0,
        "expires": 1,
        "seller": seller,
        "category": category,
        "extra": "",
    }
    return {"event_type": 1, "person": None, "auction": a, "bid": None}


def test_q1_converts_and_q2_selects() -> None:
    events = [bid(123, 1000, 0), bid(124, 10, 1), {"event_type": 3, "dateTime": 9}]
    assert [r["price"] for r in reference.q1(events)] == [908.0, 9.08]
    assert reference.q2(events) == [{"auction": 123, "price": 1000}]


def test_q3_joins_whichever_side_comes_first() -> None:
    events = [
        auction(1, seller=7, category=10),  # before its seller
        person(7, "OR"),
        auction(2, seller=7, category=10),
        auction(3, seller=7, category=11),  # other category
        person(8, "WA"),  # other state
        auction(4, seller=8, category=10),
    ]
    assert sorted(r["id"] for r in reference.q3(events)) == [1, 2]


def test_q5_keeps_the_top_auctions_of_every_sliding_window() -> None:
    events = [bid(1, 5, 1_000), bid(1, 5, 1_500), bid(2, 5, 3_000), bid(2, 5, 3_100)]
    rows = {(r["window_start"], r["auction"], r["num"]) for r in reference.q5(events)}
    # Windows [-8000, 2000) and [-6000, 4000) ... : bid times 1000-3100 in windows
    # starting -8000 to 2000 (10 s every 2 s).
    assert (-8_000, 1, 2) in rows  # only auction 1's bids
    assert {(-6_000, 1, 2), (-6_000, 2, 2)} <= rows  # a tie: both
    assert (2_000, 2, 2) in rows
    assert not any(s == 2_000 and a == 1 for s, a, _ in rows)


def test_q7_keeps_every_bid_at_the_highest_price() -> None:
    events = [bid(1, 5, 0), bid(2, 9, 1), bid(3, 9, 2), bid(4, 1, 10_000)]
    got = sorted((r["window_start"], r["auction"]) for r in reference.q7(events))
    assert got == [(0, 2), (0, 3), (10_000, 4)]


def test_the_checker_sees_missing_duplicated_and_wrong_results() -> None:
    want = [{"a": 1}, {"a": 2}]
    assert check.compare([{"a": 2}, {"a": 1}], want).ok
    verdict = check.compare([{"a": 1}, {"a": 1}, {"a": 3}], want)
    assert verdict.missing == ('{"a":2}',)
    assert verdict.extra == ('{"a":1}', '{"a":3}')
    assert "3 results, 2 expected" in verdict.describe()


def test_an_unknown_query_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigurationError, match="query= takes one of q0, q1"):
        queries.job({"query": "q99"})


def test_q8_finds_sellers_in_the_window_they_registered_in() -> None:
    late_person = person(9, "WA")
    late_person["person"]["dateTime"] = 10_000  # registered in the next window
    events = [
        person(7, "OR"),
        auction(1, seller=7, category=11),  # same window (0-10 s): a new user
        auction(2, seller=7, category=12),  # twice: still one row
        person(8, "WA"),  # never sells
        late_person,
        auction(3, seller=9, category=10),  # at 0: before the person's window
    ]
    assert reference.q8(events) == [{"id": 7, "name": "n7", "starttime": 0}]


def test_q4_averages_closing_prices_of_bids_within_each_auctions_life() -> None:
    a1, a2 = auction(1, seller=7, category=10), auction(2, seller=7, category=10)
    a1["auction"]["expires"] = a2["auction"]["expires"] = 100
    events = [
        bid(1, 50, 0),  # before its auction came (the id lead): still in its life
        a1,
        bid(1, 30, 100),  # at expiry: counts
        bid(1, 90, 101),  # after expiry: does not
        a2,
        bid(2, 10, 5),
        auction(3, seller=7, category=11),  # no bid: no closing price
    ]
    assert reference.q4(events) == {10: (2, 30.0)}


def test_q4_output_is_checked_by_its_updates_and_last_average() -> None:
    expected = {10: (2, 30.0)}
    rows = [{"category": 10, "count": 2, "avg": 30.0}, {"category": 10, "count": 1, "avg": 10.0}]
    assert check.verify("q4", rows, expected).ok
    assert check.expected_rows("q4", expected) == 2
    assert not check.verify("q4", [*rows, rows[1]], expected).ok  # an update twice
    wrong = [{**rows[0], "avg": 31.0}, rows[1]]
    assert "1 missing" in check.verify("q4", wrong, expected).describe()
