"""The table checker of the sink workloads: rows placed where first seen, each copy
counted, the verdict the word count's (pure: a table is a list of rows here)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kstream.errors import ConfigurationError
from kstream.tools.chaos.schedule import KINDS, SINK_KINDS, parse_kinds
from kstream.tools.chaos.tables import TableReader, sink_table
from kstream.tools.chaos.verdict import judge_running_count
from kstream.tools.chaos.workload import workload


class Rows:
    """A table as a list of rows that grows between reads."""

    location = "memory"
    params: dict[str, str] = {}  # noqa: RUF012 -- a stand-in, never changed

    def __init__(self) -> None:
        self.now: list[tuple[str, int]] = []

    def prepare(self) -> None:
        self.now = []

    def rows(self) -> list[tuple[str, int]]:
        return list(self.now)


def read(reader: TableReader) -> None:
    reader._next = 0.0  # due now: the pace between reads is not what is tested here
    reader.poll(0)


def test_each_row_is_placed_where_first_seen_and_a_second_copy_is_a_duplicate() -> None:
    table = Rows()
    reader = TableReader(table, time.monotonic())
    table.now = [("a", 1), ("b", 1)]
    read(reader)
    table.now += [("a", 2), ("a", 1)]  # the second ("a", 1) is a duplicate written later
    read(reader)
    assert reader.latest == {b"a": b"2", b"b": b"1"}
    assert len(reader.records) == 4
    first = {(w, n): at for w, n, at in reversed(reader.records)}
    outputs, missed = reader.final(99.0)
    assert missed == 0
    assert sorted((o.key, o.value) for o in outputs) == sorted(
        [(b"a", b"1"), (b"a", b"1"), (b"a", b"2"), (b"b", b"1")]
    )
    assert {(o.key, o.value): o.seen_at for o in outputs if o.key == b"b"} == {
        (b"b", b"1"): first["b", 1]
    }
    verdict = judge_running_count([b"a b a"], outputs, [])
    assert (verdict.duplicates, verdict.lost, verdict.out_of_order) == (1, 0, 0)


def test_rows_the_live_reads_never_saw_are_judged_as_seen_at_the_end() -> None:
    table = Rows()
    reader = TableReader(table, time.monotonic())
    table.now = [("a", 1)]
    outputs, missed = reader.final(42.0)
    assert missed == 1
    assert [o.seen_at for o in outputs] == [42.0]


def test_the_sink_workloads_and_their_fault_kinds() -> None:
    assert workload("postgres").fault_kinds == SINK_KINDS
    assert workload("delta").sink == "delta"
    assert parse_kinds("all", (*KINDS, *SINK_KINDS))[-1] == "postgres-restart"
    with pytest.raises(ConfigurationError):
        parse_kinds("postgres-restart")  # only where a workload allows it


def test_a_table_named_that_exists_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="already exists"):
        sink_table("delta", tmp_path, 0, table=str(tmp_path))
    assert sink_table("delta", tmp_path, 0).location == str(tmp_path / "delta-table")
