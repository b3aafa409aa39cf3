"""Reading a recorded range back from a channel's log: the replay rule, on records built
in the channel wire format (no broker: the log is given as offset -> record)."""

from __future__ import annotations

import struct
from typing import Any

from kstream.runtime.channels.format import RECORD, BatchFormat, encode_barrier
from kstream.testing import ReadRecord
from kstream.tools.seeds.ring import recorded_range

FMT = BatchFormat()


def data(generation: int, items: list[Any], keyed: bool = False) -> bytes:
    fmt, payload = FMT.encode(items, keyed)
    return struct.pack(">BIB", RECORD, generation, fmt) + payload


def log(*values: bytes | None) -> dict[int, ReadRecord]:
    return {
        offset: ReadRecord("t", 0, offset, None, value)
        for offset, value in enumerate(values)
        if value is not None
    }


def test_a_range_holds_the_data_of_its_windows_generations_up_to_their_ends() -> None:
    records = log(
        data(1, ["before"]),  # 0: before the range
        data(1, [["token", 3]]),  # 1: range start
        data(2, ["new generation"]),  # 2: not named by a window of generation 2
        None,  # 3: a transaction marker's offset
        data(1, ["a", "b"]),  # 4
        encode_barrier(9, 1),  # 5: the barrier ending the range
        data(1, ["after"]),  # 6
    )
    assert recorded_range(records, FMT, False, 1, [[5, 1]]) == [["token", 3], "a", "b"]
    # A window of generation 2 (carried from a restore) names record 2 too.
    assert recorded_range(records, FMT, False, 1, [[3, 2], [5, 1]]) == [
        ["token", 3],
        "new generation",
        "a",
        "b",
    ]
    # An empty range.
    assert recorded_range(records, FMT, False, 5, [[5, 1]]) == []


def test_a_keyed_channels_range_yields_the_values() -> None:
    records = log(data(1, [("X2", ["credit", "X2", 5]), ("Y2", ["credit", "Y2", 7])], keyed=True))
    assert recorded_range(records, FMT, True, 0, [[1, 1]]) == [
        ["credit", "X2", 5],
        ["credit", "Y2", 7],
    ]
