"""The Delta Lake sink's pure decisions: which pending epochs a commit adds, who may
commit, and the statistics and schema checks (no table involved)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.connectors.delta.plan import (
    PendingEpoch,
    PendingFile,
    check_generation,
    epochs_to_commit,
    file_name,
)
from kstream.connectors.delta.schema import file_stats, schema_mismatch
from kstream.errors import ProducerFencedError

epochs = st.lists(st.integers(0, 50), max_size=12)


def pending(es: list[int]) -> list[PendingEpoch]:
    return [PendingEpoch(e, (PendingFile(f"e{e}.parquet", 1, 0, "{}"),)) for e in es]


@given(epochs, st.none() | st.integers(0, 50), st.none() | st.integers(0, 50))
def test_a_commit_adds_each_epoch_once_in_order_and_only_above_the_table_s_version(
    es: list[int], upto: int | None, committed: int | None
) -> None:
    todo = [p.epoch for p in epochs_to_commit(pending(es), upto, committed)]
    assert todo == sorted(set(todo))
    expected = {
        e for e in es if (upto is None or e <= upto) and (committed is None or e > committed)
    }
    assert set(todo) == expected


@given(epochs, st.integers(0, 50))
def test_a_replayed_commit_adds_nothing(es: list[int], upto: int) -> None:
    """After a commit recorded its newest epoch, the same commit again adds nothing."""
    todo = epochs_to_commit(pending(es), upto, None)
    version = todo[-1].epoch if todo else None
    assert epochs_to_commit(pending(es), upto, version) == ()


@given(st.none() | st.integers(0, 9), st.integers(0, 9))
def test_only_a_newer_generation_in_the_table_fences_a_writer(table: int | None, mine: int) -> None:
    if table is not None and table > mine:
        with pytest.raises(ProducerFencedError, match=f"generation {table} recovered"):
            check_generation(table, mine, "t")
    else:
        check_generation(table, mine, "t")


def test_pending_epochs_survive_the_checkpoint_s_json() -> None:
    p = PendingEpoch(7, (PendingFile("a.parquet", 10, 123, '{"numRecords":1}'),))
    assert PendingEpoch.from_json(json.loads(json.dumps(p.to_json()))) == p


def test_file_names_tell_subtask_generation_and_epoch_apart() -> None:
    a = file_name("kstream:j:delta:/t:s-0", 2, 7, "n")
    assert a.startswith("part-kstream-")
    assert a.endswith("-g2-e7-n.parquet")
    assert a != file_name("kstream:j:delta:/t:s-1", 2, 7, "n")


def test_statistics_are_exact_or_left_out() -> None:
    t = pa.table(
        {
            "word": ["b", "a", None, "x" * 40],
            "n": [3, 1, 2, None],
            "f": [1.0, float("nan"), 2.0, 0.5],
            "short": ["b", "a", "c", "d"],
        }
    )
    stats = json.loads(file_stats(t))
    assert stats["numRecords"] == 4
    assert stats["nullCount"] == {"word": 1, "n": 1, "f": 0, "short": 0}
    assert stats["minValues"] == {"n": 1, "short": "a"}  # no NaN bound, no long string
    assert stats["maxValues"] == {"n": 3, "short": "d"}


def test_schema_mismatches_are_named() -> None:
    existing = [("word", "string", False), ("count", "long", True), ("extra", "double", True)]
    ok = [("word", "string"), ("count", "long")]
    assert schema_mismatch("t", ok, existing) is None
    assert "no column 'n'" in str(schema_mismatch("t", [("n", "long")], existing))
    assert "is long, the sink declares integer" in str(
        schema_mismatch("t", [("word", "string"), ("count", "integer")], existing)
    )
    assert "'word' is NOT NULL" in str(schema_mismatch("t", [("count", "long")], existing))
