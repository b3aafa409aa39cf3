"""Each Nexmark query's expected output, computed in plain Python from the events.

Event-time semantics with nothing late (`generator`: time rises on every
partition, and the end markers close every window) make a query's output a
function of its input alone: these functions give it as a list of JSON
values, in no particular order (the checker compares multisets).

- q3 is an unbounded inner join: every (person, auction) pair of the
  selection, whichever arrives first.
- q4: per category, the average closing price of its auctions: an auction's
  closing price is its highest bid between its ``dateTime`` and ``expires``
  (inclusive); auctions without such a bid have none. The output is a running
  average, ``{"category", "count", "avg"}``, one row per closed auction, in an
  order that depends on scheduling: only the rows' counts (1..N per category,
  each once) and the last average (``sum / N``) are a function of the input
  (`q4_summary`).
- q5: per sliding window (10 s, every 2 s) the auctions with the most bids in
  it, ``{"auction", "num", "window_start", "window_end"}``; windows with no bid
  have no row.
- q7: per tumbling 10 s window the bids with its highest price (all of them
  when several share it), `model.q7_row`.
- q8: the persons who opened an auction in the tumbling 10 s window they
  registered in, ``{"id", "name", "starttime"}``, once per person.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from benchmarks.nexmark import model


def _bids(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in map(model.bid_of, events) if b is not None]


def q0(events: Iterable[dict[str, Any]]) -> list[Any]:
    return _bids(events)


def q1(events: Iterable[dict[str, Any]]) -> list[Any]:
    return [model.q1_row(b) for b in _bids(events)]


def q2(events: Iterable[dict[str, Any]]) -> list[Any]:
    return [model.q2_row(b) for b in _bids(events) if model.q2_keep(b)]


def q3(events: Iterable[dict[str, Any]]) -> list[Any]:
    events = list(events)
    persons = {p["id"]: p for p in map(model.q3_person, events) if p is not None}
    return [
        model.q3_row(persons[a["seller"]], a)
        for a in map(model.q3_auction, events)
        if a is not None and a["seller"] in persons
    ]


def q4(events: Iterable[dict[str, Any]]) -> dict[int, tuple[int, float]]:
    """Per category, (closed auctions with a bid, their average closing price)."""
    events = list(events)
    auctions = {a["id"]: a for a in map(model.auction_of, events) if a is not None}
    final: dict[int, int] = {}
    for b in _bids(events):
        a = auctions.get(b["auction"])
        if a is not None and a["dateTime"] <= b["dateTime"] <= a["expires"]:
            final[a["id"]] = max(final.get(a["id"], b["price"]), b["price"])
    prices: dict[int, list[int]] = defaultdict(list)
    for aid, price in final.items():
        prices[auctions[aid]["category"]].append(price)
    return {c: (len(p), sum(p) / len(p)) for c, p in prices.items()}


def q4_summary(rows: Iterable[dict[str, Any]]) -> dict[int, tuple[int, float]]:
    """A q4 output as `q4` gives the reference; ValueError unless every category's rows
    have the counts 1..N each once (a lost or repeated update)."""
    per: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        per[r["category"]].append(r)
    out = {}
    for category, rs in per.items():
        counts = sorted(r["count"] for r in rs)
        if counts != list(range(1, len(rs) + 1)):
            raise ValueError(f"q4: category {category} has the updates {counts[:10]}...")
        out[category] = (len(rs), next(r["avg"] for r in rs if r["count"] == len(rs)))
    return out


def q5(events: Iterable[dict[str, Any]]) -> list[Any]:
    size, slide = model.Q5_SIZE_MS, model.Q5_SLIDE_MS
    counts: dict[int, Counter[int]] = defaultdict(Counter)
    for b in _bids(events):
        ts = b["dateTime"]
        # Every window [s, s + size) with s a multiple of the slide holding ts.
        last = ts - ts % slide
        for start in range(last, ts - size, -slide):
            counts[start][b["auction"]] += 1
    rows = []
    for start, per_auction in counts.items():
        top = max(per_auction.values())
        rows += [
            {"auction": a, "num": n, "window_start": start, "window_end": start + size}
            for a, n in per_auction.items()
            if n == top
        ]
    return rows


def q7(events: Iterable[dict[str, Any]]) -> list[Any]:
    size = model.Q7_SIZE_MS
    windows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for b in _bids(events):
        windows[b["dateTime"] - b["dateTime"] % size].append(b)
    rows = []
    for start, bids in windows.items():
        top = max(b["price"] for b in bids)
        rows += [model.q7_row(b, start, start + size) for b in bids if b["price"] == top]
    return rows


def q8(events: Iterable[dict[str, Any]]) -> list[Any]:
    size = model.Q8_SIZE_MS
    events = list(events)
    sellers = {
        (a["seller"], a["dateTime"] - a["dateTime"] % size)
        for a in map(model.auction_of, events)
        if a is not None
    }
    return [
        {"id": p["id"], "name": p["name"], "starttime": start}
        for p in map(model.person_of, events)
        if p is not None and (p["id"], start := p["dateTime"] - p["dateTime"] % size) in sellers
    ]


#: Each query's reference: its results (a list), q4's per-category summary (`q4`).
REFERENCES: dict[str, Callable[[Iterable[dict[str, Any]]], Any]] = {
    "q0": q0,
    "q1": q1,
    "q2": q2,
    "q3": q3,
    "q4": q4,
    "q5": q5,
    "q7": q7,
    "q8": q8,
}
