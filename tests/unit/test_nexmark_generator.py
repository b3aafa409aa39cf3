"""The Nexmark generator's rules (`benchmarks.nexmark.generator`)."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest

from benchmarks.nexmark import generator as g

N = 20_000


@pytest.fixture(scope="module")
def stream() -> list[dict[str, object]]:
    return g.generate(g.Config(N, rate=5_000, seed=7))


def kinds(events: list[dict[str, object]]) -> list[str]:
    names = {v: k for k, v in g.EVENT_TYPES.items()}
    return [names[e["event_type"]] for e in events]  # type: ignore[index]


def body(e: dict[str, object]) -> dict[str, int]:
    return e[("person", "auction", "bid")[e["event_type"]]]  # type: ignore[index,return-value]


def test_proportions_are_1_3_46_in_every_block_of_50(stream: list[dict[str, object]]) -> None:
    k = kinds(stream)
    for start in range(0, N, 50):
        assert Counter(k[start : start + 50]) == {"person": 1, "auction": 3, "bid": 46}


def test_person_and_auction_ids_count_up_from_1000(stream: list[dict[str, object]]) -> None:
    persons = [body(e)["id"] for e in stream if e["event_type"] == 0]
    auctions = [body(e)["id"] for e in stream if e["event_type"] == 1]
    assert persons == list(range(1000, 1000 + N // 50))
    assert auctions == list(range(1000, 1000 + 3 * N // 50))


def test_event_time_follows_the_rate_and_never_decreases(
    stream: list[dict[str, object]],
) -> None:
    times = [body(e)["dateTime"] for e in stream]
    assert times[0] == g.Config(N).base_ms
    assert all(a <= b for a, b in pairwise(times))
    # 5,000 events per second of event time: 20,000 events span 4 s.
    assert times[-1] - times[0] == (N - 1) * 1000 // 5_000
    assert [g.event_time(e) for e in stream] == times


def test_bids_and_sellers_refer_within_the_leads(stream: list[dict[str, object]]) -> None:
    last_auction, last_person = -1, -1
    for e in stream:
        b = body(e)
        if e["event_type"] == 0:
            last_person = b["id"]
        elif e["event_type"] == 1:
            last_auction = b["id"]
            assert 1000 <= b["seller"] <= last_person + g.PERSON_ID_LEAD
            assert b["expires"] > b["dateTime"]
            assert b["reserve"] > b["initialBid"] > 0
            assert 10 <= b["category"] < 10 + g.CATEGORIES
        else:
            low = max(last_auction - g.IN_FLIGHT_AUCTIONS, 1000)
            assert low <= b["auction"] <= last_auction + g.AUCTION_ID_LEAD
            assert 1000 <= b["bidder"] <= last_person + g.PERSON_ID_LEAD
            assert 100 <= b["price"] <= 100_000_000


def test_without_leads_every_reference_exists_already() -> None:
    persons, auctions = set(), set()
    for e in g.events(g.Config(10_000, auction_lead=0, person_lead=0)):
        b = body(e)
        if e["event_type"] == 0:
            persons.add(b["id"])
        elif e["event_type"] == 1:
            assert b["seller"] in persons
            auctions.add(b["id"])
        else:
            assert b["auction"] in auctions
            assert b["bidder"] in persons


def test_hot_auctions_get_half_the_bids(stream: list[dict[str, object]]) -> None:
    bids = Counter(body(e)["auction"] for e in stream if e["event_type"] == 2)
    hot = sum(n for a, n in bids.items() if (a - 1000) % g.HOT_RATIO == 0)
    assert 0.45 < hot / sum(bids.values()) < 0.6


def test_the_same_seed_gives_the_same_bytes_and_another_seed_does_not() -> None:
    a = [g.encode(e) for e in g.events(g.Config(2_000, seed=1))]
    assert a == [g.encode(e) for e in g.events(g.Config(2_000, seed=1))]
    assert a != [g.encode(e) for e in g.events(g.Config(2_000, seed=2))]


def test_end_marker_is_past_every_event_and_has_a_time() -> None:
    config = g.Config(1_000)
    marker = g.end_marker(config)
    assert g.event_time(marker) == config.time_of(999) + g.FLUSH_AHEAD_MS


def test_unusable_events_have_no_time() -> None:
    assert g.event_time("text") is None
    assert g.event_time({"event_type": 2, "bid": None}) is None
    assert g.event_time({"event_type": "2", "bid": {"dateTime": 1}}) is None
    assert g.event_time({"event_type": 7}) is None


@pytest.mark.parametrize("bad", [{"count": -1}, {"count": 1, "rate": 0}])
def test_bad_configs_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be"):
        g.Config(**bad)
