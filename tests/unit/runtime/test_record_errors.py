"""`kstream.runtime.worker.dead_letters`: the fail and skip policies, which write nothing.

The dead-letter policy writes through a real producer and is tested against a
broker (`tests/e2e/test_job_safety.py`, `tests/integration/test_record_limits.py`).
"""

from __future__ import annotations

import pytest

from kstream.errors import JobFailedError, RecordTooLargeError
from kstream.runtime.worker.dead_letters import RecordErrors


def errors(policy: str) -> RecordErrors:
    # No producer: these policies must never write.
    return RecordErrors(policy, "j", "s0-0", producer=None, max_record_bytes=1000)  # type: ignore[arg-type]


def test_fail_stops_the_job_naming_the_task_the_record_and_the_cause() -> None:
    cause = ValueError("bad")
    with pytest.raises(JobFailedError) as caught:
        errors("fail").apply(cause, "record in[0]@7", b"k", b"v", [])
    assert str(caught.value) == "s0-0: record in[0]@7 failed: ValueError: bad"
    assert caught.value.__cause__ is cause


def test_skip_counts_a_dropped_record_and_writes_nothing() -> None:
    e = errors("skip")
    e.apply(ValueError("bad"), "record in[0]@7", b"k", b"v", [])
    e.on_channel_record_too_large("x", RecordTooLargeError("too big", value=b"x" * 10))
    assert (e.counts.dropped, e.counts.dead_letters, e.counts.last_dead_letter) == (2, 0, "")


def test_with_out_dead_letters_are_handed_over_with_where_and_why() -> None:
    kept: list[tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]]]] = []
    e = RecordErrors(
        "dead-letter",
        "j",
        "s1-0",
        producer=None,
        max_record_bytes=100_000,
        out=lambda *letter: kept.append(letter),  # type: ignore[arg-type]
    )
    e.record_failed(ValueError("bad"), "in", 2, 7, b"k", b"raw")
    e.record_failed(ValueError("worse"), "in", 2, 8, b"k", b"raw", item=("key", 1))
    e.timer_failed(RuntimeError("late"), "event", "key", 1_000)
    assert [(t, k, v) for t, k, v, _ in kept] == [
        ("kstream.j.dead-letters", b"k", b"raw"),
        ("kstream.j.dead-letters", b"k", b"('key', 1)"),
        ("kstream.j.dead-letters", None, b"('key', 1000)"),
    ]
    first = dict(kept[0][3])
    assert first["kstream.error"] == b"ValueError: bad"
    assert (first["kstream.src.topic"], first["kstream.src.offset"]) == (b"in", b"7")
    assert dict(kept[2][3])["kstream.error"] == b"RuntimeError: late"
    assert e.counts.dead_letters == 3
    with pytest.raises(JobFailedError):
        e.timer_failed(JobFailedError("stop"), "event", "key", 1)
