"""`kstream.connectors.rows.as_row`: results as rows, bad ones refused in one line."""

from __future__ import annotations

from typing import Any

import pytest

from kstream.connectors.rows import as_row
from kstream.errors import RecordError

COLUMNS = ("word", "count")


@pytest.mark.parametrize(
    "value",
    [("a", 1), ["a", 1], {"count": 1, "word": "a", "other": 2}, ("a", None)],
)
def test_results_become_rows_in_column_order(value: Any) -> None:
    row = as_row("t", COLUMNS, (True, False), value)
    assert tuple(row) == ("a", value["count"] if isinstance(value, dict) else value[1])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"word": "a"}, "t: result has no column count"),
        (("a", 1, 2), "t: result has 3 fields, the sink writes 2 columns (word, count)"),
        ("a 1", "t: a result must be a tuple or a mapping of word, count, not str"),
        ((None, 1), "t: column word is NOT NULL, the result has None"),
    ],
)
def test_bad_results_are_record_errors_naming_the_table(value: Any, message: str) -> None:
    with pytest.raises(RecordError) as caught:
        as_row("t", COLUMNS, (True, False), value)
    assert str(caught.value) == message


def test_the_required_word_is_the_table_kinds() -> None:
    with pytest.raises(RecordError, match="column word is required"):
        as_row("t", COLUMNS, (True, True), (None, 1), "required")
