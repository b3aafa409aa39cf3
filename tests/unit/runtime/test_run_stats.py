"""`kstream.runtime.run_stats`: what a completed checkpoint says the job covered."""

from __future__ import annotations

from kstream.protocol.coordinator import Complete
from kstream.protocol.messages import Acked
from kstream.runtime.run_stats import RunStats


def test_a_topic_read_by_two_source_stages_is_covered_as_far_as_the_slower() -> None:
    stats = RunStats()
    acks = [
        Acked(3, 1, "s0-0", source_offsets={"orders": {0: 90, 1: 70}}),
        Acked(3, 1, "s2-0", source_offsets={"orders": {0: 40, 1: 80}}),
        Acked(3, 1, "s1-0", source_offsets={"payments": {0: 5}}),
        Acked(3, 1, "s3-0", channel_offsets={"kstream.j.s3": {0: 7}}),
    ]
    channels = stats.checkpoint_completed(Complete(3, 1, 0.1, 0, 0.0), acks)
    assert stats.source_offsets == {"orders": {0: 40, 1: 70}, "payments": {0: 5}}
    assert channels == {"kstream.j.s3": {0: 7}}
    assert stats.latest == 3
