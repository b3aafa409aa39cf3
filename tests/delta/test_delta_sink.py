"""`DeltaSink` and its writer against real Delta tables on the local file system,
driven as the runtime drives a sink (recover, epochs of write/pre_commit, commit or
abort), and read back independently with deltalake."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable, write_deltalake

from kstream.connectors.delta import DeltaSink
from kstream.connectors.delta.writer import BATCH_ROWS
from kstream.dataflow.outputs import SinkContext, SinkWriter
from kstream.errors import (
    ConfigurationError,
    ProducerFencedError,
    RecordError,
    RecordRefusedError,
)

COLUMNS = {"word": "string", "count": "long"}


def context(generation: int = 1, task: str = "s1-0") -> SinkContext:
    return SinkContext(
        "nowhere:9092", "delta-test", task, generation, producer=None,  # type: ignore[arg-type]
    )  # fmt: skip


def rows(uri: str) -> list[tuple[Any, ...]]:
    t = DeltaTable(uri).to_pyarrow_table()
    return sorted(zip(t.column("word").to_pylist(), t.column("count").to_pylist(), strict=True))


def opened(sink: DeltaSink, generation: int = 1, task: str = "s1-0") -> SinkWriter:
    return sink.open(context(generation, task))


@pytest.fixture
def sink(tmp_path: Path) -> DeltaSink:
    s = DeltaSink(str(tmp_path / "wc"), COLUMNS)
    s.check("")
    return s


def test_an_epoch_is_invisible_when_pre_committed_and_visible_once_committed(
    sink: DeltaSink,
) -> None:
    w = opened(sink)
    w.recover(None, None)
    w.begin_epoch(1)
    for v in [("a", 1), {"word": "b", "count": 1}, ["a", 2]]:
        w.write(v)
    kept = w.pre_commit(5)
    assert rows(sink.uri) == []
    [pending] = kept.meta["pending"]
    assert pending["epoch"] == 5
    [f] = pending["files"]
    assert (Path(sink.uri) / f["path"]).stat().st_size == f["size"]
    assert json.loads(f["stats"])["numRecords"] == 3
    w.commit(5)
    assert rows(sink.uri) == [("a", 1), ("a", 2), ("b", 1)]
    table = DeltaTable(sink.uri)
    assert table.transaction_version("kstream:delta-test:" + sink.name + ":s1-0") == 5
    w.commit(5)  # idempotent
    assert DeltaTable(sink.uri).version() == table.version()
    w.close()


def test_a_failed_checkpoint_s_epoch_is_committed_with_the_next_one(sink: DeltaSink) -> None:
    w = opened(sink)
    w.recover(None, None)
    w.write(("a", 1))
    w.pre_commit(5)
    w.abort(5)
    w.write(("b", 1))
    kept = w.pre_commit(7)
    assert [p["epoch"] for p in kept.meta["pending"]] == [5, 7]
    w.commit(7)
    assert rows(sink.uri) == [("a", 1), ("b", 1)]


def test_recovery_commits_what_the_checkpoint_kept_once_and_nothing_after_it(
    sink: DeltaSink,
) -> None:
    w = opened(sink, generation=1)
    w.recover(None, None)
    w.write(("kept", 1))
    kept = w.pre_commit(5)  # checkpoint 5 completes, the process dies before commit
    w.write(("later", 1))
    w.pre_commit(7)  # checkpoint 7 never completes
    for generation in (2, 3):  # the recovery itself crashes once after its commit
        successor = opened(sink, generation=generation)
        successor.recover(5, kept)
        successor.close()
    assert rows(sink.uri) == [("kept", 1)]
    # The second recovery found epoch 5 in the table by its transaction version and
    # added nothing (Delta would also fold a second add of the same path into one).
    history = DeltaTable(sink.uri).history(2)
    assert [h.get("kstream.epochs") for h in history] == [[], [5]]
    parquet = [p for p in os.listdir(sink.uri) if p.endswith(".parquet")]
    assert len(parquet) == 2  # epoch 7's file stays unreferenced (vacuum removes it)


def test_a_zombie_commits_nothing_once_a_successor_recovered(sink: DeltaSink) -> None:
    zombie = opened(sink, generation=1)
    zombie.recover(None, None)
    zombie.write(("zombie", 1))
    zombie.pre_commit(5)
    successor = opened(sink, generation=2)
    successor.recover(3, None)
    with pytest.raises(ProducerFencedError, match="generation 2 recovered"):
        zombie.commit(5)
    assert rows(sink.uri) == []
    # Other subtasks are not fenced by it.
    other = opened(sink, generation=1, task="s1-1")
    other.recover(None, None)
    other.write(("other", 1))
    other.pre_commit(5)
    other.commit(5)
    assert rows(sink.uri) == [("other", 1)]


def test_a_zombie_that_raced_its_successor_loses_the_commit(
    sink: DeltaSink, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The zombie checks the generation on a snapshot taken before the successor's
    recovery commit and commits after it: delta-rs's conflict check on the shared
    app_id fails that commit, and the retry, on the newer snapshot, is fenced."""
    zombie = opened(sink, generation=1)
    zombie.recover(None, None)
    zombie.write(("zombie", 1))
    zombie.pre_commit(5)
    stale = DeltaTable(sink.uri)  # the snapshot the zombie checked before it stopped
    successor = opened(sink, generation=2)
    successor.recover(3, None)
    fresh = zombie._snapshot  # type: ignore[attr-defined]
    snapshots = iter([stale])
    monkeypatch.setattr(zombie, "_snapshot", lambda: next(snapshots, None) or fresh())
    caplog.set_level("INFO", "kstream.sink.delta")
    with pytest.raises(ProducerFencedError, match="generation 2 recovered"):
        zombie.commit(5)
    assert "Concurrent transaction" in caplog.text
    assert next(snapshots, None) is None  # the stale snapshot was used, then a fresh one
    assert rows(sink.uri) == []


def test_a_table_of_a_newer_generation_refuses_the_recovery(sink: DeltaSink) -> None:
    opened(sink, generation=4).recover(None, None)
    with pytest.raises(ProducerFencedError):
        opened(sink, generation=3).recover(None, None)


def test_at_least_once_commits_at_the_barrier(sink: DeltaSink) -> None:
    ctx = context()
    w = sink.open(SinkContext(**{**_fields(ctx), "guarantee": "at-least-once"}))
    w.recover(None, None)
    w.write(("a", 1))
    w.pre_commit(5)
    assert rows(sink.uri) == [("a", 1)]


def _fields(ctx: SinkContext) -> dict[str, Any]:
    return {f: getattr(ctx, f) for f in ctx.__dataclass_fields__}


def test_results_that_cannot_be_rows_are_record_errors(sink: DeltaSink) -> None:
    w = opened(sink)
    w.recover(None, None)
    for bad in [("a",), {"word": "a"}, 3]:
        with pytest.raises(RecordError):
            w.write(bad)


def test_a_value_arrow_refuses_is_raised_in_one_line_without_an_error_policy(
    sink: DeltaSink,
) -> None:
    w = opened(sink)
    w.recover(None, None)
    w.write(("a", "not a number"))
    with pytest.raises(RecordRefusedError, match=r"refused row \('a', 'not a number'\)") as info:
        w.pre_commit(5)
    assert "\n" not in str(info.value)


def test_values_arrow_refuses_go_to_the_error_policy_and_the_others_land(
    sink: DeltaSink,
) -> None:
    """A value that does not fit its column's type is the row's refusal, found when
    the rows become Arrow (every `BATCH_ROWS` and at the barrier): the error policy
    gets the row with Arrow's message in one line, and the epoch's other rows land
    once it commits, in one file."""
    refused: list[tuple[Any, RecordError]] = []
    ctx = replace(context(), refused=lambda value, exc: refused.append((value, exc)))
    w = sink.open(ctx)
    w.recover(None, None)
    good = [(f"w{i}", i) for i in range(1, BATCH_ROWS + 2_000)]
    bad = [("x", "not a number"), ("y", 2**70), (3, 3), ("z", 1.5e300)]
    # The first two in the first batch converted, the others at the barrier.
    values = [*good[:700], bad[0], *good[700:1500], bad[1], *good[1500:], bad[2], bad[3]]
    w.begin_epoch(1)
    for v in values:
        w.write(v)
    kept = w.pre_commit(1)
    assert [v for v, _ in refused] == bad
    [pending] = kept.meta["pending"]
    [f] = pending["files"]
    assert json.loads(f["stats"])["numRecords"] == len(good)
    assert rows(sink.uri) == []  # pre-committed: nothing visible yet
    w.commit(1)
    assert rows(sink.uri) == sorted(good)
    columns = ["count (long)", "count (long)", "word (string)", "count (long)"]
    for (value, exc), column in zip(refused, columns, strict=True):
        assert isinstance(exc, RecordRefusedError)
        assert str(exc).startswith(
            f"Delta table {sink.uri} refused row {value!r}: column {column}: "
        ), exc
        assert "\n" not in str(exc)
    assert "Could not convert 'not a number'" in str(refused[0][1]), refused[0][1]


def test_an_epoch_whose_every_row_is_refused_commits_nothing_and_recovers(
    sink: DeltaSink,
) -> None:
    """Nothing left of an epoch: no file, no Delta commit, and no application
    transaction; the table's version of the subtask stays at the last epoch with
    rows, and a recovery from the checkpoint after it adds nothing."""
    refused: list[Any] = []
    ctx = replace(context(), refused=lambda value, exc: refused.append(value))
    w = sink.open(ctx)
    w.recover(None, None)
    w.write(("a", 1))
    w.pre_commit(1)
    w.commit(1)
    version = DeltaTable(sink.uri).version()
    w.write(("x", "n/a"))
    kept = w.pre_commit(2)
    assert kept.meta["pending"] == []
    w.commit(2)
    assert refused == [("x", "n/a")]
    table = DeltaTable(sink.uri)
    assert table.version() == version
    assert table.transaction_version(f"kstream:delta-test:{sink.name}:s1-0") == 1
    assert len([p for p in os.listdir(sink.uri) if p.endswith(".parquet")]) == 1
    successor = sink.open(replace(ctx, generation=2))
    successor.recover(2, kept)
    assert rows(sink.uri) == [("a", 1)]
    # At least once, the same: nothing to commit at the barrier.
    once = sink.open(replace(ctx, generation=3, guarantee="at-least-once"))
    once.recover(None, None)
    once.write(("y", "n/a"))
    once.pre_commit(3)
    assert refused == [("x", "n/a"), ("y", "n/a")]
    assert DeltaTable(sink.uri).version() == version + 1  # the successor's fencing commit


def test_a_missing_table_is_created_with_the_declared_columns(tmp_path: Path) -> None:
    uri = str(tmp_path / "new")
    DeltaSink(uri, COLUMNS).check("")
    assert [(f.name, f.type.type) for f in DeltaTable(uri).schema().fields] == [  # type: ignore[union-attr]
        ("word", "string"),
        ("count", "long"),
    ]
    with pytest.raises(ConfigurationError, match="no Delta table at"):
        DeltaSink(str(tmp_path / "absent"), COLUMNS, create=False).check("")


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"word": "string", "n": "long"}, "has no column 'n'"),
        ({"word": "string", "count": "integer"}, "'count' is long, the sink declares integer"),
        ({"count": "long"}, "column 'word' is NOT NULL and the sink does not write it"),
    ],
)
def test_a_table_that_does_not_take_the_declared_columns_is_refused_in_one_line(
    tmp_path: Path, columns: dict[str, str], message: str
) -> None:
    import pyarrow as pa

    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("word", pa.string(), nullable=False), ("count", pa.int64())])
    write_deltalake(uri, pa.table({"word": ["x"], "count": [1]}, schema=schema))
    with pytest.raises(ConfigurationError, match=message) as info:
        DeltaSink(uri, columns).check("")
    assert "\n" not in str(info.value)


def test_an_unknown_type_and_an_unwritable_location_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="has type 'varchar'"):
        DeltaSink(str(tmp_path / "t"), {"word": "varchar"})
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(ConfigurationError, match="cannot create the Delta table's directory"):
        DeltaSink(str(a_file / "t"), COLUMNS).check("")
