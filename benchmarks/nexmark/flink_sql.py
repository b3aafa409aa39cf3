"""The Nexmark queries in Flink SQL, Kafka to Kafka, and Flink's output in the checker's shape.

Pure text and values, no PyFlink: `benchmarks.nexmark.flink_job` runs these
statements in Flink's own virtualenv, and the suite (`benchmarks.nexmark.bench`)
reads the output with `normalise`. Imports only the standard library and
`model`, whose constants both sides share.

The queries are written as the Nexmark project writes them for Flink SQL, with
two changes that make their output the reference's (`reference`): q5 and q7
join each window's rows with the window's maximum by a *window join* (on the
window's start and end: a bid at exactly a window's end belongs to the next
window, where Nexmark's interval join would take it twice; Flink's window
Top-N would be simpler but supports only ``ROW_NUMBER``, which drops ties),
and every query takes its columns from the one input topic
(`generator`: ``event_type`` says which of person, auction, bid is set).

q4 is Nexmark's regular join and two aggregations, an updating result: its sink
is ``upsert-kafka`` keyed by category (`UPSERT_QUERIES`), so the topic holds a
changelog whose last value per key is the result (a tombstone deletes a key:
a category whose only auction's maximum is being replaced). Its average is
over DOUBLE (Flink's AVG of a BIGINT is a BIGINT) and it counts the closed
auctions, so a category's row is the reference's (count, average).

Event time is the event's ``dateTime`` (the end marker's own ``dateTime``),
with a watermark 1 ms behind the largest seen per partition (Flink's
"ascending timestamps": several events share a millisecond, and none is late).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from benchmarks.nexmark import model

#: Queries with a Flink SQL version.
FLINK_QUERIES = ("q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8")

#: Queries whose result updates: written by ``upsert-kafka``, keyed by the sink's
#: primary key, and read as the last value per key (`check.verify_upserts`).
UPSERT_QUERIES = frozenset({"q4"})

#: The broker's default `transaction.max.timeout.ms` is 15 min; Flink's sink asks 1 h.
TRANSACTION_TIMEOUT_MS = 600_000

_PERSON = (
    "id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, "
    "state STRING, `dateTime` BIGINT, extra STRING"
)
_AUCTION = (
    "id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT, "
    "`dateTime` BIGINT, expires BIGINT, seller BIGINT, category BIGINT, extra STRING"
)
_BID = (
    "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
    "`dateTime` BIGINT, extra STRING"
)

#: Each query's output columns (the sink table's schema), in the reference's names.
SINK_COLUMNS: dict[str, str] = {
    "q0": _BID,
    "q1": "auction BIGINT, bidder BIGINT, price DECIMAL(23, 3), `dateTime` BIGINT, extra STRING",
    "q2": "auction BIGINT, price BIGINT",
    "q3": "name STRING, city STRING, state STRING, id BIGINT",
    "q4": "category BIGINT, `count` BIGINT, `avg` DOUBLE, PRIMARY KEY (category) NOT ENFORCED",
    "q5": "auction BIGINT, num BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3)",
    "q7": (
        "auction BIGINT, price BIGINT, bidder BIGINT, `dateTime` BIGINT, extra STRING, "
        "window_start TIMESTAMP(3), window_end TIMESTAMP(3)"
    ),
    "q8": "id BIGINT, name STRING, starttime TIMESTAMP(3)",
}

#: Columns Flink writes as a timestamp (wall clock in UTC) that the reference holds as
#: epoch milliseconds.
TIME_COLUMNS = frozenset({"window_start", "window_end", "starttime"})

_VIEWS = (
    "CREATE TEMPORARY VIEW person AS SELECT person.id AS id, person.name AS name, "
    "person.city AS city, person.state AS state, ts FROM events WHERE event_type = 0",
    "CREATE TEMPORARY VIEW auction AS SELECT auction.id AS id, auction.seller AS seller, "
    "auction.category AS category, auction.`dateTime` AS `dateTime`, "
    "auction.expires AS expires, ts FROM events WHERE event_type = 1",
    "CREATE TEMPORARY VIEW bid AS SELECT bid.auction AS auction, bid.bidder AS bidder, "
    "bid.price AS price, bid.channel AS channel, bid.url AS url, "
    "bid.`dateTime` AS `dateTime`, bid.extra AS extra, ts FROM events WHERE event_type = 2",
)


def _states() -> str:
    return ", ".join(f"'{s}'" for s in sorted(model.Q3_STATES))


def _query(query: str) -> str:
    """The SELECT whose rows go to the sink, in `SINK_COLUMNS` order."""
    size7 = model.Q7_SIZE_MS // 1000
    size5, slide5 = model.Q5_SIZE_MS // 1000, model.Q5_SLIDE_MS // 1000
    size8 = model.Q8_SIZE_MS // 1000
    counts5 = (
        "SELECT auction, COUNT(*) AS num, window_start, window_end FROM TABLE(HOP("
        f"TABLE bid, DESCRIPTOR(ts), INTERVAL '{slide5}' SECOND, INTERVAL '{size5}' SECOND)) "
        "GROUP BY auction, window_start, window_end"
    )
    tumble7 = f"TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '{size7}' SECOND))"
    selects = {
        "q0": "SELECT auction, bidder, price, channel, url, `dateTime`, extra FROM bid",
        "q1": (
            f"SELECT auction, bidder, CAST({model.EURO_RATE} * price AS DECIMAL(23, 3)), "
            "`dateTime`, extra FROM bid"
        ),
        "q2": f"SELECT auction, price FROM bid WHERE MOD(auction, {model.Q2_MODULUS}) = 0",
        "q3": (
            "SELECT P.name, P.city, P.state, A.id FROM auction AS A INNER JOIN person AS P "
            f"ON A.seller = P.id WHERE A.category = {model.Q3_CATEGORY} "
            f"AND P.state IN ({_states()})"
        ),
        # Nexmark's q4: an auction's closing price is its highest bid within its life
        # (a regular join: state for every auction and bid, none expired).
        "q4": (
            "SELECT Q.category, COUNT(*), AVG(CAST(Q.final AS DOUBLE)) FROM ("
            " SELECT MAX(B.price) AS final, A.category FROM auction AS A, bid AS B"
            " WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires"
            " GROUP BY A.id, A.category) AS Q "
            "GROUP BY Q.category"
        ),
        "q5": (
            f"SELECT C.auction, C.num, C.window_start, C.window_end FROM ({counts5}) AS C "
            "JOIN (SELECT window_start, window_end, MAX(num) AS top FROM "
            f"({counts5}) GROUP BY window_start, window_end) AS M "
            "ON C.window_start = M.window_start AND C.window_end = M.window_end "
            "AND C.num = M.top"
        ),
        "q7": (
            "SELECT B.auction, B.price, B.bidder, B.`dateTime`, B.extra, B.window_start, "
            f"B.window_end FROM (SELECT * FROM {tumble7}) AS B "
            "JOIN (SELECT window_start, window_end, MAX(price) AS top FROM "
            f"{tumble7} GROUP BY window_start, window_end) AS M "
            "ON B.window_start = M.window_start AND B.window_end = M.window_end "
            "AND B.price = M.top"
        ),
        "q8": (
            "SELECT P.id, P.name, P.starttime FROM ("
            " SELECT id, name, window_start AS starttime, window_end AS endtime FROM TABLE(TUMBLE("
            f"  TABLE person, DESCRIPTOR(ts), INTERVAL '{size8}' SECOND))"
            " GROUP BY id, name, window_start, window_end) AS P JOIN ("
            " SELECT seller, window_start AS starttime, window_end AS endtime FROM TABLE(TUMBLE("
            f"  TABLE auction, DESCRIPTOR(ts), INTERVAL '{size8}' SECOND))"
            " GROUP BY seller, window_start, window_end) AS A "
            "ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime"
        ),
    }
    return selects[query]


def statements(
    query: str,
    *,
    bootstrap: str,
    source: str,
    output: str,
    group: str,
    transactional_id_prefix: str,
) -> list[str]:
    """The DDL (source, views, sink) and the INSERT of `query`, in execution order.

    The source reads `source` from its earliest offset; the sink writes `output`
    with Kafka transactions committed on Flink's checkpoints (exactly-once):
    ``kafka`` (values only) or, for `UPSERT_QUERIES`, ``upsert-kafka`` (the
    primary key's columns as the record's key, JSON too).
    Raises KeyError for a query without a Flink version (`FLINK_QUERIES`).
    """
    columns = SINK_COLUMNS[query]
    source_ddl = (
        "CREATE TABLE events ("
        f" event_type INT, person ROW<{_PERSON}>, auction ROW<{_AUCTION}>, bid ROW<{_BID}>,"
        " `dateTime` BIGINT,"
        " ts AS TO_TIMESTAMP_LTZ(CASE event_type WHEN 0 THEN person.`dateTime`"
        "  WHEN 1 THEN auction.`dateTime` WHEN 2 THEN bid.`dateTime` ELSE `dateTime` END, 3),"
        " WATERMARK FOR ts AS ts - INTERVAL '0.001' SECOND"
        ") WITH ("
        " 'connector' = 'kafka',"
        f" 'topic' = '{source}',"
        f" 'properties.bootstrap.servers' = '{bootstrap}',"
        f" 'properties.group.id' = '{group}',"
        " 'properties.isolation.level' = 'read_committed',"
        " 'scan.startup.mode' = 'earliest-offset',"
        " 'format' = 'json',"
        " 'json.fail-on-missing-field' = 'false',"
        " 'json.ignore-parse-errors' = 'false')"
    )
    if query in UPSERT_QUERIES:
        formats = (
            " 'connector' = 'upsert-kafka', 'key.format' = 'json', 'value.format' = 'json',"
            " 'value.json.encode.decimal-as-plain-number' = 'true',"
            " 'value.json.timestamp-format.standard' = 'ISO-8601'"
        )
    else:
        formats = (
            " 'connector' = 'kafka', 'format' = 'json',"
            " 'json.encode.decimal-as-plain-number' = 'true',"
            " 'json.timestamp-format.standard' = 'ISO-8601'"
        )
    sink_ddl = (
        f"CREATE TABLE sink ({columns}) WITH ("
        f"{formats},"
        f" 'topic' = '{output}',"
        f" 'properties.bootstrap.servers' = '{bootstrap}',"
        f" 'properties.transaction.timeout.ms' = '{TRANSACTION_TIMEOUT_MS}',"
        " 'sink.delivery-guarantee' = 'exactly-once',"
        f" 'sink.transactional-id-prefix' = '{transactional_id_prefix}')"
    )
    return [source_ddl, *_VIEWS, sink_ddl, f"INSERT INTO sink {_query(query)}"]


def _epoch_ms(text: str) -> int:
    """An ISO-8601 wall-clock time in UTC (Flink's JSON of a TIMESTAMP) as epoch ms."""
    moment = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return round(moment.timestamp() * 1000)


def normalise(row: dict[str, Any]) -> dict[str, Any]:
    """One of Flink's output rows in the reference's shape: window times as epoch ms,
    q1's decimal price as the float `json` reads (it writes the same number)."""
    out = dict(row)
    for column in TIME_COLUMNS & out.keys():
        if isinstance(out[column], str):
            out[column] = _epoch_ms(out[column])
    return out


def decode(value: bytes | None) -> Any:
    """A Flink output record's value, read and normalised."""
    row = json.loads(value or b"null")
    return normalise(row) if isinstance(row, dict) else row
