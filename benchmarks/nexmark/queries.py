"""The Nexmark queries as kstream jobs, Kafka to Kafka, exactly-once.

    kstream run benchmarks.nexmark.queries:job -p query=q1 -p input=nexmark \
        -p output=q1-out [-p late=TOPIC] [-p name=NAME]

Input: the generator's topic (`benchmarks.nexmark.generator`: one topic, all
three kinds, event time rising on every partition, end markers after the
data). Output: JSON values, one per result (`benchmarks.nexmark.reference`
says which); the windowed queries (q5, q7, q8) send too-late records to
``-p late`` (default ``<output>-late``), which stays empty on the
generator's input. Every sink is kstream's transactional `KafkaSink`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from benchmarks.nexmark import model
from benchmarks.nexmark.generator import event_time
from kstream import LATE, Job, KafkaSink, KafkaSource, KeyedContext, Stream, sliding, tumbling
from kstream.errors import ConfigurationError

#: Longer than any run: a partition is never left out of the watermark as idle
#: (every partition has data and an end marker).
IDLE_TIMEOUT_MS = 24 * 3_600_000


def _source(j: Job, params: dict[str, str]) -> Stream[Any]:
    return j.source(
        KafkaSource(
            params.get("input", "nexmark"),
            value_serde="json",
            timestamps=event_time,
            out_of_orderness_ms=0,
            idle_timeout_ms=IDLE_TIMEOUT_MS,
        )
    )


def _bids(j: Job, params: dict[str, str]) -> Stream[dict[str, Any]]:
    return _source(j, params).flat_map(_one(model.bid_of), name="bids")


def _one(
    fn: Callable[[dict[str, Any]], dict[str, Any] | None],
) -> Callable[[dict[str, Any]], tuple[dict[str, Any], ...]]:
    """`fn`'s result as zero or one outputs (None: none)."""

    def one(event: dict[str, Any]) -> tuple[dict[str, Any], ...]:
        out = fn(event)
        return () if out is None else (out,)

    return one


def _sink(params: dict[str, str]) -> KafkaSink:
    return KafkaSink(params.get("output", "nexmark-out"), value_serde="json")


def _late_sink(params: dict[str, str]) -> KafkaSink:
    output = params.get("output", "nexmark-out")
    return KafkaSink(params.get("late", f"{output}-late"), value_serde="json")


def q0(j: Job, params: dict[str, str]) -> None:
    """Pass-through: every bid as is."""
    _bids(j, params).sink(_sink(params))


def q1(j: Job, params: dict[str, str]) -> None:
    """Currency conversion: every bid with its price in euros."""
    _bids(j, params).map(model.q1_row, name="q1").sink(_sink(params))


def q2(j: Job, params: dict[str, str]) -> None:
    """Selection: (auction, price) of the bids on every 123rd auction."""
    _bids(j, params).filter(model.q2_keep).map(model.q2_row, name="q2").sink(_sink(params))


def _q3_person(key: Any, person: dict[str, Any], ctx: KeyedContext) -> Iterator[Any]:
    # Person ids are unique: the waiting auctions meet their seller once.
    ctx.value("person").set(person)
    waiting = ctx.list("auctions")
    for auction in waiting:
        yield model.q3_row(person, auction)
    waiting.clear()


def _q3_auction(key: Any, auction: dict[str, Any], ctx: KeyedContext) -> Iterator[Any]:
    person = ctx.value("person").get()
    if person is None:
        ctx.list("auctions").append(auction)
    else:
        yield model.q3_row(person, auction)


def q3(j: Job, params: dict[str, str]) -> None:
    """Local item suggestion: sellers of OR, ID, CA joined with their category-10
    auctions (an unbounded inner join: each pair once, whichever side came first)."""
    events = _source(j, params)
    persons = events.flat_map(_one(model.q3_person), name="persons").key_by(lambda p: p["id"])
    auctions = events.flat_map(_one(model.q3_auction), name="auctions").key_by(
        lambda a: a["seller"]
    )
    persons.connect(auctions).process(_q3_person, _q3_auction, name="q3").sink(_sink(params))


def _q4_auction(key: Any, auction: dict[str, Any], ctx: KeyedContext) -> Iterator[Any]:
    ctx.value("auction").set(auction)
    # Fires once every event up to `expires` has been seen (times rise per partition).
    ctx.timers.register(auction["expires"] + 1)
    early = ctx.list("early")  # bids that came before their auction (the id lead)
    for bid in early:
        _q4_fold(auction, bid, ctx)
    early.clear()
    return iter(())


def _q4_fold(auction: dict[str, Any], bid: dict[str, Any], ctx: KeyedContext) -> None:
    if auction["dateTime"] <= bid["dateTime"] <= auction["expires"]:
        best = ctx.value("best")
        best.set(max(best.get(bid["price"]), bid["price"]))


def _q4_bid(key: Any, bid: dict[str, Any], ctx: KeyedContext) -> Iterator[Any]:
    auction = ctx.value("auction").get()
    if auction is None:
        ctx.list("early").append(bid)
    else:
        _q4_fold(auction, bid, ctx)
    return iter(())


def _q4_close(key: Any, ts: int, ctx: KeyedContext) -> Iterator[Any]:
    auction, best = ctx.value("auction").get(), ctx.value("best").get()
    ctx.value("auction").clear()
    ctx.value("best").clear()
    if auction is not None and best is not None:
        yield {"category": auction["category"], "final": best}


def _q4_average(key: Any, closed: dict[str, Any], ctx: KeyedContext) -> Iterator[Any]:
    count, total = ctx.get((0, 0))
    count, total = count + 1, total + closed["final"]
    ctx.set((count, total))
    yield {"category": key, "count": count, "avg": total / count}


def q4(j: Job, params: dict[str, str]) -> None:
    """Average closing price per category: auctions joined with their bids by id until
    they expire (an event-time timer closes each), then a running average per category
    (one row per closed auction; the last row of a category is its average)."""
    events = _source(j, params)
    auctions = events.flat_map(_one(model.auction_of), name="auctions").key_by(lambda a: a["id"])
    bids = events.flat_map(_one(model.bid_of), name="bids").key_by(lambda b: b["auction"])
    closed = auctions.connect(bids).process(
        _q4_auction, _q4_bid, on_timer=_q4_close, name="q4-close"
    )
    closed.key_by(lambda c: c["category"]).process(_q4_average, name="q4").sink(_sink(params))


def _top(acc: list[Any], result: dict[str, Any]) -> list[Any]:
    """q5's per-window accumulator [most bids, auctions with that many]."""
    if result["value"] > acc[0]:
        return [result["value"], [result["key"]]]
    if result["value"] == acc[0]:
        acc[1].append(result["key"])
    return acc


def _q5_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    end = result["key"]
    num, auctions = result["value"]
    start = end - model.Q5_SIZE_MS
    return [{"auction": a, "num": num, "window_start": start, "window_end": end} for a in auctions]


def q5(j: Job, params: dict[str, str]) -> None:
    """Hot items: per sliding window (10 s every 2 s) the auctions with the most bids.

    Counts per (auction, window) first; a count is stamped with its window's end,
    so the second stage, keyed by that end, gathers one window's counts in one
    tumbling window of the slide and keeps the top ones."""
    counts = (
        _bids(j, params)
        .key_by(lambda b: b["auction"])
        .window(sliding(model.Q5_SIZE_MS, model.Q5_SLIDE_MS))
        .count(name="q5-counts")
    )
    counts.side_output(LATE).sink(_late_sink(params))
    top = (
        counts.key_by(lambda r: r["end"])
        .window(tumbling(model.Q5_SLIDE_MS))
        .aggregate([0, []], _top, name="q5-top")
    )
    top.side_output(LATE).sink(_late_sink(params))
    top.flat_map(_q5_rows, name="q5").sink(_sink(params))


def _highest(acc: list[Any], bid: dict[str, Any]) -> list[Any]:
    """q7's per-window accumulator [highest price, bids with that price]."""
    if bid["price"] > acc[0]:
        return [bid["price"], [bid]]
    if bid["price"] == acc[0]:
        acc[1].append(bid)
    return acc


def _q7_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [model.q7_row(b, result["start"], result["end"]) for b in result["value"][1]]


def q7(j: Job, params: dict[str, str]) -> None:
    """Highest bid: per tumbling 10 s window the bids with its highest price (one key:
    the whole window, as in Nexmark, so one subtask does the work)."""
    highest = (
        _bids(j, params)
        .key_by(lambda _: 0)
        .window(tumbling(model.Q7_SIZE_MS))
        .aggregate([-1, []], _highest, name="q7-highest")
    )
    highest.side_output(LATE).sink(_late_sink(params))
    highest.flat_map(_q7_rows, name="q7").sink(_sink(params))


def _q8_add(acc: list[Any], value: dict[str, Any]) -> list[Any]:
    """q8's per-window accumulator [the person's name or None, an auction seen]."""
    if "seller" in value:
        acc[1] = True
    else:
        acc[0] = value["name"]
    return acc


def _q8_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    name, sold = result["value"]
    if name is None or not sold:
        return []
    return [{"id": result["key"], "name": name, "starttime": result["start"]}]


def q8(j: Job, params: dict[str, str]) -> None:
    """New users: persons who opened an auction in the 10 s tumbling window they
    registered in (a windowed join: persons by id and auctions by seller in one
    keyed window)."""
    events = _source(j, params)
    persons = events.flat_map(_one(model.person_of), name="persons").key_by(lambda p: p["id"])
    auctions = events.flat_map(_one(model.auction_of), name="auctions").key_by(
        lambda a: a["seller"]
    )
    joined = (
        persons.union(auctions)
        .window(tumbling(model.Q8_SIZE_MS))
        .aggregate([None, False], _q8_add, name="q8-window")
    )
    joined.side_output(LATE).sink(_late_sink(params))
    joined.flat_map(_q8_rows, name="q8").sink(_sink(params))


BUILDERS: dict[str, Callable[[Job, dict[str, str]], None]] = {
    "q0": q0,
    "q1": q1,
    "q2": q2,
    "q3": q3,
    "q4": q4,
    "q5": q5,
    "q7": q7,
    "q8": q8,
}


def job(params: dict[str, str]) -> Job:
    """Parameters: `query` (one of `model.QUERIES`), `input`, `output`, optionally
    `late`, `name`."""
    query = params.get("query", "")
    build = BUILDERS.get(query)
    if build is None:
        raise ConfigurationError(
            f"-p query= takes one of {', '.join(model.QUERIES)}, got {query!r}"
        )
    j = Job(params.get("name", f"nexmark-{query}-{params.get('input', 'nexmark')}"))
    build(j, params)
    return j
