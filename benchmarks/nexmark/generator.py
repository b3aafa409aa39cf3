"""A deterministic Nexmark event generator, written from the Nexmark specification.

Pure generation (`generate`, `events`) is apart from Kafka writing (`write`).
The rules (docs/benchmarks/nexmark.md):

- Events are numbered 0, 1, 2, ...; in every block of 50 consecutive numbers
  the first is a person, the next 3 are auctions, the other 46 are bids
  (`kind_of`). Person ids and auction ids count up from 1000 in creation
  order (`person_id`, `auction_id`).
- Event time: event n is stamped ``base_ms + n * 1000 // rate`` (ms), so
  times never decrease in event order and `rate` events span one second.
- A bid's auction is, 1 time in 2, a *hot* auction (the last created one
  rounded down to a multiple of 100 ids, `HOT_RATIO`), otherwise one of the
  last `IN_FLIGHT_AUCTIONS` created, or up to `AUCTION_ID_LEAD` ids ahead of
  the last one (an auction not yet created, as the specification allows; 0
  keeps every bid on an existing auction). Its bidder and an auction's seller
  follow the same rule over persons (`ACTIVE_PERSONS`, `PERSON_ID_LEAD`), hot
  3 times in 4.
- An auction's category is one of `CATEGORIES` ids from 10; an auction expires
  after a random length averaging the time `IN_FLIGHT_AUCTIONS` auctions take
  to be created; prices are ``round(10 ** (6 u) * 100)`` cents (u uniform in
  [0, 1)), the reserve above the initial bid.
- One `random.Random(seed)` drives everything in event order: the same
  (seed, count, rate, base) gives the same events, byte for byte.

Encoding: the JSON shape Nexmark's Kafka source reads, ``{"event_type": 0|1|2,
"person": {...}|null, "auction": {...}|null, "bid": {...}|null}`` with
``dateTime`` (and ``expires``) as epoch milliseconds. Event n goes to partition
``n % partitions`` so every partition's event time rises. After the data each
partition gets one end marker ``{"event_type": 3, "dateTime": end}``
(`end_marker`), `FLUSH_AHEAD_MS` past the last event: every query ignores
it, but it moves every partition's watermark past every window of the data.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from kstream.errors import ConfigurationError

Kind = Literal["person", "auction", "bid"]

PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
BID_PROPORTION = 46
TOTAL_PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
CATEGORIES = 5
#: Persons a seller or bidder is drawn from (the most recent ones).
ACTIVE_PERSONS = 1000
#: Auctions a bid is drawn from (the most recent ones).
IN_FLIGHT_AUCTIONS = 100
#: How far past the last created id a drawn person or auction id may be.
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
#: A "hot" id is the last created one rounded down to a multiple of this.
HOT_RATIO = 100
#: 1 in this many draws of an auction (a bid's), a seller, a bidder is uniform over
#: the recent ids; the others take the hot id (Nexmark's default configuration).
HOT_AUCTION_DRAWS = 2
HOT_SELLER_DRAWS = 4
HOT_BIDDER_DRAWS = 4
#: The event type numbers of Nexmark's Kafka encoding; 3 is this project's end marker.
EVENT_TYPES: dict[Kind, int] = {"person": 0, "auction": 1, "bid": 2}
END_MARKER_TYPE = 3
_KINDS = {number: kind for kind, number in EVENT_TYPES.items()}
#: How far the end markers are past the last event: more than any query's window.
FLUSH_AHEAD_MS = 60_000

FIRST_NAMES = (
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
)  # fmt: skip
LAST_NAMES = (
    "Shultz",
    "Abrams",
    "Spencer",
    "White",
    "Bartels",
    "Walton",
    "Smith",
    "Jones",
    "Noris",
)
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = (
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle",
    "Kent", "Cheyenne",
)  # fmt: skip
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS = 10_000


@dataclass(frozen=True)
class Config:
    """What the generated stream depends on: `count` events from `base_ms`, `rate` events
    per second of event time, `seed`; `auction_lead`/`person_lead` as in the module doc."""

    count: int
    rate: int = 10_000
    seed: int = 42
    base_ms: int = 1_700_000_000_000
    auction_lead: int = AUCTION_ID_LEAD
    person_lead: int = PERSON_ID_LEAD

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ConfigurationError(f"the event count must be >= 0, got {self.count}")
        if self.rate < 1:
            raise ConfigurationError(f"the rate must be at least 1 event/s, got {self.rate}")

    def time_of(self, n: int) -> int:
        """Event n's time (ms)."""
        return self.base_ms + n * 1000 // self.rate

    @property
    def end_ms(self) -> int:
        """The end markers' time."""
        return self.time_of(max(self.count - 1, 0)) + FLUSH_AHEAD_MS


def kind_of(n: int) -> Kind:
    offset = n % TOTAL_PROPORTION
    if offset < PERSON_PROPORTION:
        return "person"
    if offset < PERSON_PROPORTION + AUCTION_PROPORTION:
        return "auction"
    return "bid"


def last_person(n: int) -> int:
    """The base-0 number of the last person created at or before event n."""
    epoch, offset = divmod(n, TOTAL_PROPORTION)
    return epoch * PERSON_PROPORTION + min(offset, PERSON_PROPORTION - 1)


def last_auction(n: int) -> int:
    """The base-0 number of the last auction created at or before event n (-1: none yet)."""
    epoch, offset = divmod(n, TOTAL_PROPORTION)
    if offset < PERSON_PROPORTION:
        return epoch * AUCTION_PROPORTION - 1
    return epoch * AUCTION_PROPORTION + min(offset - PERSON_PROPORTION, AUCTION_PROPORTION - 1)


def _person_ref(n: int, rnd: random.Random, lead: int, draws: int) -> int:
    last = last_person(n)
    if rnd.randrange(draws) > 0:
        return FIRST_PERSON_ID + last // HOT_RATIO * HOT_RATIO
    active = min(last + 1, ACTIVE_PERSONS)
    return FIRST_PERSON_ID + last + 1 - active + rnd.randrange(active + lead)


def _auction_ref(n: int, rnd: random.Random, lead: int) -> int:
    last = max(last_auction(n), 0)
    if rnd.randrange(HOT_AUCTION_DRAWS) > 0:
        return FIRST_AUCTION_ID + last // HOT_RATIO * HOT_RATIO
    low = max(last - IN_FLIGHT_AUCTIONS, 0)
    return FIRST_AUCTION_ID + low + rnd.randrange(last - low + 1 + lead)


def _price(rnd: random.Random) -> int:
    return round(float(10.0 ** (rnd.random() * 6.0)) * 100.0)


def _text(rnd: random.Random, length: int) -> str:
    return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(length))


def _person(n: int, ts: int, rnd: random.Random) -> dict[str, Any]:
    return {
        "id": FIRST_PERSON_ID + last_person(n),
        "name": f"{rnd.choice(FIRST_NAMES)} {rnd.choice(LAST_NAMES)}",
        "emailAddress": f"{_text(rnd, 7)}@{_text(rnd, 5)}.com",
        "creditCard": " ".join(f"{rnd.randrange(10_000):04d}" for _ in range(4)),
        "city": rnd.choice(US_CITIES),
        "state": rnd.choice(US_STATES),
        "dateTime": ts,
        "extra": "",
    }


def _auction(n: int, ts: int, rnd: random.Random, config: Config) -> dict[str, Any]:
    initial = _price(rnd)
    # Nexmark sizes an auction's life so that about IN_FLIGHT_AUCTIONS are open at once.
    mean_ms = IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION * 1000 // (AUCTION_PROPORTION * config.rate)
    return {
        "id": FIRST_AUCTION_ID + last_auction(n),
        "itemName": _text(rnd, 8),
        "description": _text(rnd, 16),
        "initialBid": initial,
        "reserve": initial + _price(rnd),
        "dateTime": ts,
        "expires": ts + 1 + rnd.randrange(2 * max(mean_ms, 1)),
        "seller": _person_ref(n, rnd, config.person_lead, HOT_SELLER_DRAWS),
        "category": FIRST_CATEGORY_ID + rnd.randrange(CATEGORIES),
        "extra": "",
    }


def _bid(n: int, ts: int, rnd: random.Random, config: Config) -> dict[str, Any]:
    auction = _auction_ref(n, rnd, config.auction_lead)
    bidder = _person_ref(n, rnd, config.person_lead, HOT_BIDDER_DRAWS)
    price = _price(rnd)
    if rnd.randrange(2) > 0:
        i = rnd.randrange(len(HOT_CHANNELS))
        channel, url = (
            HOT_CHANNELS[i],
            f"https://www.nexmark.com/{HOT_CHANNELS[i].lower()}/item.htm",
        )
    else:
        c = rnd.randrange(CHANNELS)
        channel, url = f"channel-{c}", f"https://www.nexmark.com/item.htm?channel_id={c}"
    return {
        "auction": auction,
        "bidder": bidder,
        "price": price,
        "channel": channel,
        "url": url,
        "dateTime": ts,
        "extra": "",
    }


def events(config: Config) -> Iterator[dict[str, Any]]:
    """The `config.count` events in event order, each in the Kafka encoding's shape."""
    rnd = random.Random(config.seed)
    for n in range(config.count):
        ts = config.time_of(n)
        kind = kind_of(n)
        event: dict[str, Any] = {
            "event_type": EVENT_TYPES[kind],
            "person": None,
            "auction": None,
            "bid": None,
        }
        if kind == "person":
            event["person"] = _person(n, ts, rnd)
        elif kind == "auction":
            event["auction"] = _auction(n, ts, rnd, config)
        else:
            event["bid"] = _bid(n, ts, rnd, config)
        yield event


def generate(config: Config) -> list[dict[str, Any]]:
    return list(events(config))


def end_marker(config: Config) -> dict[str, Any]:
    return {"event_type": END_MARKER_TYPE, "dateTime": config.end_ms}


def event_time(event: Any) -> Any:
    """An encoded event's time (ms): the source's timestamp function. Anything else is an
    unusable timestamp (kstream sends the record to the dead-letter topic)."""
    if not isinstance(event, dict):
        return None
    kind = event.get("event_type")
    if kind == END_MARKER_TYPE:
        return event.get("dateTime")
    name = _KINDS.get(kind) if type(kind) is int else None
    body = event.get(name) if name is not None else None
    return body.get("dateTime") if isinstance(body, dict) else None


def encode(event: dict[str, Any]) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode()


def write(
    bootstrap: str,
    topic: str,
    config: Config,
    partitions: int,
    *,
    generated: Iterable[dict[str, Any]] | None = None,
    chunk: int = 50_000,
) -> dict[int, int]:
    """Write the events and the end markers (event n to partition n % partitions, in
    order); return each partition's end offset (records written, the topic being new).
    `generated` is ``events(config)`` when the caller holds them already."""
    from kstream.testing import produce  # the Kafka client only when writing

    by_partition: list[list[tuple[bytes | None, bytes | None]]] = [[] for _ in range(partitions)]
    ends = dict.fromkeys(range(partitions), 0)

    def flush() -> None:
        for p, rows in enumerate(by_partition):
            if rows:
                produce(bootstrap, topic, rows, partition=p)
                ends[p] += len(rows)
                rows.clear()

    for n, event in enumerate(events(config) if generated is None else generated):
        by_partition[n % partitions].append((None, encode(event)))
        if (n + 1) % chunk == 0:
            flush()
    marker = encode(end_marker(config))
    for rows in by_partition:
        rows.append((None, marker))
    flush()
    return ends
