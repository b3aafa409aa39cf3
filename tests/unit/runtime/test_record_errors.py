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
