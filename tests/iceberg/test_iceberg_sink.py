"""`IcebergSink` and its writer against a real SQL catalog (SQLite) and real files,
driven as the runtime drives a sink (recover, epochs of write/pre_commit, commit or
abort); the table is read back with pyiceberg."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from iceberg_tables import make_table
from pyiceberg.catalog import load_catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from kstream.connectors.iceberg import IcebergSink
from kstream.connectors.iceberg.marks import EPOCH_KEY, GENERATION_KEY, SINK_KEY
from kstream.dataflow.outputs import SinkContext, SinkWriter
from kstream.errors import (
    ConfigurationError,
    DatabaseError,
    ProducerFencedError,
    RecordError,
    RecordRefusedError,
)

pytestmark = [pytest.mark.iceberg]


def context(
    generation: int = 1, task: str = "s1-0", guarantee: Any = "exactly-once"
) -> SinkContext:
    return SinkContext(
        "nowhere:9092", "ice-test", task, generation, producer=None,  # type: ignore[arg-type]
        guarantee=guarantee,
    )  # fmt: skip


def rows(props: dict[str, str], table: str) -> Counter[tuple[Any, ...]]:
    t = load_catalog("default", **props).load_table(table)
    data = t.scan().to_arrow().to_pylist()
    return Counter((r["word"], r["count"]) for r in data)


def marks(props: dict[str, str], table: str) -> list[dict[str, str]]:
    t = load_catalog("default", **props).load_table(table)
    return [
        {k: v for k, v in s.summary.additional_properties.items() if k.startswith("kstream.")}
        for s in t.snapshots()
        if s.summary is not None
    ]


def sink(props: dict[str, str], table: str) -> IcebergSink:
    return IcebergSink(props, table, ("word", "count"))


def opened(props: dict[str, str], table: str, generation: int = 1, **kw: Any) -> SinkWriter:
    w = sink(props, table).open(context(generation, **kw))
    w.recover(None, None)
    return w


def epoch(w: SinkWriter, n: int, values: list[Any]) -> Any:
    w.begin_epoch(n)
    for v in values:
        w.write(v)
    return w.pre_commit(n)


def test_an_epoch_is_invisible_when_pre_committed_and_appended_once_committed(
    catalog: dict[str, str], table: str
) -> None:
    sink(catalog, table).check("")
    w = opened(catalog, table)
    kept = epoch(w, 5, [("a", 1), {"word": "b", "count": 1}, ["a", 2]])
    [[e, files]] = kept.meta["pending"]
    assert e == 5
    assert all(Path(f.removeprefix("file://")).is_file() for f in files)
    assert rows(catalog, table) == Counter()
    w.commit(5)
    w.commit(5)  # idempotent
    assert rows(catalog, table) == Counter({("a", 1): 1, ("b", 1): 1, ("a", 2): 1})
    h = "kstream:ice-test:iceberg:db.word_counts:s1-0"
    assert marks(catalog, table)[-1] == {SINK_KEY: h, EPOCH_KEY: "5", GENERATION_KEY: "1"}
    w.close()


def test_a_failed_checkpoints_epoch_is_committed_with_the_next_completed_one(
    catalog: dict[str, str], table: str
) -> None:
    w = opened(catalog, table)
    epoch(w, 3, [("a", 1)])
    w.abort(3)
    kept = epoch(w, 7, [("b", 1)])
    assert [e for e, _ in kept.meta["pending"]] == [3, 7]
    w.commit(7)
    assert rows(catalog, table) == Counter({("a", 1): 1, ("b", 1): 1})
    assert marks(catalog, table)[-1][EPOCH_KEY] == "7"


def test_recovery_commits_a_kept_epoch_once_and_never_an_unkept_one(
    catalog: dict[str, str], table: str
) -> None:
    w = opened(catalog, table)
    kept = epoch(w, 4, [("a", 1)])
    epoch(w, 6, [("lost", 1)])  # its checkpoint never completed: never committed
    w.close()  # a crash after checkpoint 4 completed, before its commit
    w2 = sink(catalog, table).open(context(2))
    w2.recover(4, kept)
    assert rows(catalog, table) == Counter({("a", 1): 1})
    # A crash after the commit: the table records epoch 4, nothing more lands.
    w3 = sink(catalog, table).open(context(3))
    w3.recover(4, kept)
    assert rows(catalog, table) == Counter({("a", 1): 1})
    assert [m.get(GENERATION_KEY) for m in marks(catalog, table)] == ["1", "2", "3"]


def test_a_zombie_commits_nothing_once_its_successor_recovered(
    catalog: dict[str, str], table: str
) -> None:
    zombie = opened(catalog, table, generation=1)
    kept = epoch(zombie, 4, [("a", 1)])
    epoch(zombie, 6, [("z", 1)])
    successor = sink(catalog, table).open(context(2))
    successor.recover(4, kept)
    with pytest.raises(ProducerFencedError, match="generation 2"):
        zombie.commit(6)
    assert rows(catalog, table) == Counter({("a", 1): 1})
    # The successor goes on; another subtask's zombie generation is not affected.
    epoch(successor, 8, [("b", 1)])
    successor.commit(8)
    other = opened(catalog, table, generation=1, task="s1-1")
    epoch(other, 8, [("c", 1)])
    other.commit(8)
    assert rows(catalog, table) == Counter({("a", 1): 1, ("b", 1): 1, ("c", 1): 1})


def test_at_least_once_appends_at_the_barrier(catalog: dict[str, str], table: str) -> None:
    w = sink(catalog, table).open(context(guarantee="at-least-once"))
    w.recover(None, None)
    epoch(w, 2, [("a", 1)])
    assert rows(catalog, table) == Counter({("a", 1): 1})


def test_results_that_are_not_rows_are_record_errors(catalog: dict[str, str], table: str) -> None:
    w = opened(catalog, table)
    for bad, words in [
        (("a",), "has 1 fields"),
        ({"word": "a"}, "no column count"),
        (("a", None), "count is required"),
        (3, "not int"),
    ]:
        with pytest.raises(RecordError, match=words):
            w.write(bad)
    # No error policy at hand: a value Arrow refuses is raised, in one line.
    w.begin_epoch(1)
    w.write(("a", "not a number"))
    with pytest.raises(RecordRefusedError, match=r"refused row \('a', 'not a number'\)"):
        w.pre_commit(1)


def test_values_arrow_refuses_go_to_the_error_policy_and_the_others_land(
    catalog: dict[str, str], table: str
) -> None:
    """A value that does not fit its column's type is the row's refusal, found when
    the epoch's file is written: the error policy gets the row with Arrow's message
    in one line, and the epoch's other rows land once it commits."""
    refused: list[tuple[Any, RecordError]] = []
    ctx = replace(context(), refused=lambda value, exc: refused.append((value, exc)))
    w = sink(catalog, table).open(ctx)
    w.recover(None, None)
    good = [(f"w{i}", i) for i in range(1, 2_000)]
    bad = [("x", "not a number"), ("y", 2**70), (3, 3)]
    values = [*good[:700], bad[0], *good[700:1500], bad[1], bad[2], *good[1500:]]
    epoch(w, 1, values)
    assert [v for v, _ in refused] == bad
    assert rows(catalog, table) == Counter()  # pre-committed: nothing visible yet
    w.commit(1)
    assert rows(catalog, table) == Counter(good)
    columns = ["count (int64)", "count (int64)", "word (large_string)"]
    for (value, exc), column in zip(refused, columns, strict=True):
        assert isinstance(exc, RecordRefusedError)
        assert str(exc).startswith(f"{table} refused row {value!r}: column {column}: "), exc
        assert "\n" not in str(exc)
    assert "Could not convert 'not a number'" in str(refused[0][1]), refused[0][1]
    # An epoch whose every row is refused adds no file and no rows.
    refused.clear()
    epoch(w, 2, [("x", "n/a")])
    w.commit(2)
    assert [v for v, _ in refused] == [("x", "n/a")]
    assert rows(catalog, table) == Counter(good)


def test_check_refuses_bad_tables_in_one_line(catalog: dict[str, str], tmp_path: Path) -> None:
    cat = load_catalog("default", **catalog)
    make_table(catalog, "db.t")
    cat.create_table(
        "db.needs",
        Schema(
            NestedField(1, "word", StringType(), required=False),
            NestedField(2, "n", LongType(), required=True),
        ),
    )
    cat.create_table(
        "db.parts",
        Schema(NestedField(1, "word", StringType(), required=False)),
        partition_spec=PartitionSpec(PartitionField(1, 1000, IdentityTransform(), "word_part")),
    )
    cases = [
        (IcebergSink(catalog, "db.missing", ("word",)), ConfigurationError, "does not exist"),
        (IcebergSink(catalog, "db.t", ("word", "nope")), ConfigurationError, "no column nope"),
        (IcebergSink(catalog, "db.needs", ("word",)), ConfigurationError, "requires n"),
        (IcebergSink(catalog, "db.parts", ("word",)), ConfigurationError, "partitioned"),
        (
            IcebergSink({"type": "sql", "uri": f"sqlite:///{tmp_path}/no/such/dir/c.db"},
                        "db.t", ("word",)),
            DatabaseError,
            "cannot",
        ),
    ]  # fmt: skip
    for s, error, words in cases:
        with pytest.raises(error, match=words) as info:
            s.check("")
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigurationError, match=r"namespace\.table"):
        IcebergSink(catalog, "t", ("word",))


@pytest.mark.s3
def test_a_warehouse_in_an_object_store_takes_epochs_and_recoveries(
    tmp_path: Path, bucket: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same protocol with the warehouse on S3Proxy (``s3://``), the catalog on SQLite."""
    # Arrow's AWS SDK sends the newer checksum headers by default, which S3Proxy
    # refuses on multipart uploads (as kstream's own S3 client is told, objects.py).
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "WHEN_REQUIRED")
    monkeypatch.setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", "WHEN_REQUIRED")
    store = bucket.store
    props = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": f"s3://{bucket.name}/warehouse",
        "s3.endpoint": store.endpoint,
        "s3.access-key-id": store.env["AWS_ACCESS_KEY_ID"],
        "s3.secret-access-key": store.env["AWS_SECRET_ACCESS_KEY"],
        "s3.region": store.env["AWS_REGION"],
        "s3.force-virtual-addressing": "false",
    }
    load_catalog("default", **props).create_namespace("db")
    make_table(props, "db.t")
    w = opened(props, "db.t")
    kept = epoch(w, 4, [("a", 1), ("b", 1)])
    [[_, [path]]] = kept.meta["pending"]
    assert path.startswith(f"s3://{bucket.name}/warehouse/")
    assert any(k.endswith(path.rsplit("/", 1)[1]) for k in bucket.listing("warehouse/"))
    assert rows(props, "db.t") == Counter()
    w.close()  # a crash before the commit: the successor commits the kept epoch once
    for generation in (2, 3):
        sink(props, "db.t").open(context(generation)).recover(4, kept)
    assert rows(props, "db.t") == Counter({("a", 1): 1, ("b", 1): 1})
