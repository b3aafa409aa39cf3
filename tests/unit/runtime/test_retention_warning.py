"""`retention_warning`: when an output topic's retention would delete results of old input."""

from __future__ import annotations

from kstream.runtime.runner.preflight import retention_warning

DAY = 86_400_000
NOW = 1_780_000_000_000


def test_no_warning_when_every_input_is_younger_than_the_retention() -> None:
    assert retention_warning({"out": 7 * DAY}, {"in": NOW - 6 * DAY}, NOW) is None
    assert retention_warning({"out": 7 * DAY}, {}, NOW) is None
    assert retention_warning({}, {"in": 1}, NOW) is None


def test_one_line_names_the_topics_whose_retention_is_too_short() -> None:
    line = retention_warning(
        {"long": 365 * DAY, "short": 7 * DAY, "tiny": 60_000},
        {"recent": NOW - DAY, "backfill": NOW - 30 * DAY},
        NOW,
    )
    assert line is not None
    assert "\n" not in line
    assert line.startswith(
        "WARNING: output topics short, tiny keep records for retention.ms=60000 (60 s), "
        "but input backfill has event time from "
    )
    assert line.endswith("set retention.ms=-1 (or longer) on them")
