"""`kstream.runtime.runner.stats`: what a completed checkpoint says the job covered."""

from __future__ import annotations

from kstream.protocol.coordination import Complete
from kstream.protocol.messages import Acked
from kstream.runtime.runner.stats import RunStats


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


def test_checkpoints_that_recorded_channel_state_are_counted_once_each() -> None:
    stats = RunStats()
    aligned = [Acked(4, 1, "s0-0"), Acked(4, 1, "s1-0"), Acked(4, 1, "s1-1")]
    stats.checkpoint_completed(Complete(4, 1, 0.1, 0, 0.0), aligned)
    assert (stats.unaligned, stats.in_flight) == (0, 0)
    switched = [
        Acked(5, 1, "s0-0"),
        Acked(5, 1, "s1-0", unaligned=True, in_flight=3),
        Acked(5, 1, "s1-1", unaligned=True),
    ]
    stats.checkpoint_completed(Complete(5, 1, 0.1, 0, 0.0), switched)
    assert (stats.unaligned, stats.in_flight) == (1, 3)
