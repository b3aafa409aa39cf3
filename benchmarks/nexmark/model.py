"""What a Nexmark query is, shared by the kstream jobs and the plain-Python references:
the per-event functions (selection, projection, conversion) and the queries' constants.

Both sides call these same functions, so a query's job and its reference can
differ only in how records travel (partitions, windows, state), which is what
the check is about.
"""

from __future__ import annotations

from typing import Any

#: Queries built so far, in order.
QUERIES = ("q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8")

#: q1: dollars to euros, Nexmark's factor.
EURO_RATE = 0.908
#: q2: bids whose auction id is a multiple of this.
Q2_MODULUS = 123
#: q3: sellers of these states, auctions of this category.
Q3_STATES = frozenset({"OR", "ID", "CA"})
Q3_CATEGORY = 10
#: q5: sliding windows of this size and slide; q7: tumbling windows of this size.
Q5_SIZE_MS, Q5_SLIDE_MS = 10_000, 2_000
Q7_SIZE_MS = 10_000
#: q8: tumbling windows of this size.
Q8_SIZE_MS = 10_000


def bid_of(event: dict[str, Any]) -> dict[str, Any] | None:
    bid: dict[str, Any] | None = event.get("bid") if event.get("event_type") == 2 else None
    return bid


def q1_row(bid: dict[str, Any]) -> dict[str, Any]:
    return {
        "auction": bid["auction"],
        "bidder": bid["bidder"],
        "price": round(EURO_RATE * bid["price"], 3),
        "dateTime": bid["dateTime"],
        "extra": bid["extra"],
    }


def q2_keep(bid: dict[str, Any]) -> bool:
    return bool(bid["auction"] % Q2_MODULUS == 0)


def q2_row(bid: dict[str, Any]) -> dict[str, Any]:
    return {"auction": bid["auction"], "price": bid["price"]}


def q3_person(event: dict[str, Any]) -> dict[str, Any] | None:
    p: dict[str, Any] | None = event.get("person") if event.get("event_type") == 0 else None
    return p if p is not None and p["state"] in Q3_STATES else None


def q3_auction(event: dict[str, Any]) -> dict[str, Any] | None:
    a: dict[str, Any] | None = event.get("auction") if event.get("event_type") == 1 else None
    return a if a is not None and a["category"] == Q3_CATEGORY else None


def q3_row(person: dict[str, Any], auction: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": person["name"],
        "city": person["city"],
        "state": person["state"],
        "id": auction["id"],
    }


def person_of(event: dict[str, Any]) -> dict[str, Any] | None:
    p: dict[str, Any] | None = event.get("person") if event.get("event_type") == 0 else None
    return p


def auction_of(event: dict[str, Any]) -> dict[str, Any] | None:
    a: dict[str, Any] | None = event.get("auction") if event.get("event_type") == 1 else None
    return a


def q7_row(bid: dict[str, Any], start: int, end: int) -> dict[str, Any]:
    return {
        "auction": bid["auction"],
        "price": bid["price"],
        "bidder": bid["bidder"],
        "dateTime": bid["dateTime"],
        "extra": bid["extra"],
        "window_start": start,
        "window_end": end,
    }
