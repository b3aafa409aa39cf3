"""Loops in the job API: iterate/feed_back, their plan (a `loop` channel of its own)
and the one-line refusals of loops that cannot run."""

from __future__ import annotations

import pytest

from kstream import ConfigurationError, Job, KafkaSink, KafkaSource
from kstream.dataflow.describe import describe
from kstream.dataflow.plan import TaskSpec, plan
from kstream.dataflow.stream import IterationHead, Stream


def step(n: int) -> int:
    return n // 2 if n % 2 == 0 else 3 * n + 1


def done(n: int) -> bool:
    return n == 1


def not_done(n: int) -> bool:
    return n != 1


def looped(name: str = "loopy", *, body_stage: bool = True) -> tuple[Job, IterationHead, Stream]:
    """source -> head -> (rebalance ->) body; body's not-done values feed back."""
    j = Job(name)
    head = j.source(KafkaSource("nums")).iterate("collatz")
    body = head.map(step)
    if body_stage:
        body = body.rebalance()
    body.filter(done).sink(KafkaSink("out"))
    return j, head, body


def test_feedback_edge_is_a_loop_input_with_its_own_topic() -> None:
    j, head, body = looped()
    head.feed_back(body.filter(not_done))
    p = plan(j, 2)
    h = j.stages[1]
    assert h.iterate == "collatz"
    assert [(i.upstream.index, i.loop) for i in h.inputs] == [(0, False), (2, True)]
    assert [i.upstream.index for i in h.forward_inputs] == [0]
    assert p.channel_topics() == {
        "kstream.loopy.s1": 4,
        "kstream.loopy.s1.loop": 4,
        "kstream.loopy.s2": 4,
    }
    # Subtask 1 of the head reads partitions i*D+1 of each input topic.
    assert p.loop_channels(TaskSpec(1, 1, 2)) == {
        ("kstream.loopy.s1.loop", 1),
        ("kstream.loopy.s1.loop", 3),
    }
    assert p.loop_channels(TaskSpec(2, 0, 2)) == set()
    text = "\n".join(describe(p))
    assert "stage 1 (parallelism 2, iterate collatz)" in text
    assert "input 1: round-robin from stage 2, loop (logged, not aligned), " in text
    assert "-> stage 1 input 1 (loop)" in text


def test_a_loop_inside_the_head_stage_feeds_back_to_itself() -> None:
    j, head, body = looped(body_stage=False)
    head.feed_back(body.filter(not_done))
    p = plan(j, 1)
    assert [(i.upstream.index, i.loop) for i in j.stages[1].inputs] == [(0, False), (1, True)]
    assert p.loop_channels(TaskSpec(1, 0, 1)) == {("kstream.loopy.s1.loop", 0)}


def test_only_a_head_has_feed_back() -> None:
    # The type checker refuses it before the run: a plain Stream has no feed_back.
    _, head, body = looped()
    assert isinstance(head, IterationHead)
    assert not hasattr(body, "feed_back")
    with pytest.raises(AttributeError, match="feed_back"):
        body.feed_back(body.filter(not_done))  # type: ignore[attr-defined]


def test_a_head_never_closed_is_refused() -> None:
    j, _, _ = looped()
    with pytest.raises(ConfigurationError, match="iterate 'collatz' of job loopy is never closed"):
        plan(j, 1)


def test_a_head_closed_twice_is_refused() -> None:
    _, head, body = looped()
    head.feed_back(body.filter(not_done))
    with pytest.raises(ConfigurationError, match="closed already"):
        head.feed_back(body.map(step))


def test_feedback_from_a_stream_the_head_does_not_feed_is_refused() -> None:
    j, head, _ = looped()
    other = j.source(KafkaSource("other")).rebalance()
    other.sink(KafkaSink("x"))
    with pytest.raises(ConfigurationError, match=r"which the head \(stage 1\) does not feed"):
        head.feed_back(other.map(step))
    upstream = j.stages[0]
    with pytest.raises(ConfigurationError, match="does not feed"):
        head.feed_back(Stream(j.graph, upstream, upstream.root))


def test_loops_that_cross_are_refused_and_nested_ones_accepted() -> None:
    j = Job("j1")
    a = j.source(KafkaSource("nums")).iterate("a")  # stage 1
    b = a.rebalance().iterate("b")  # stage 3 (2 is the rebalance)
    tail_a = b.rebalance()  # stage 4
    tail_b = tail_a.rebalance()  # stage 5
    tail_b.sink(KafkaSink("out"))
    a.feed_back(tail_a.filter(not_done))  # loop a: stages 1-4
    b.feed_back(tail_b.filter(not_done))  # loop b: stages 3-5
    with pytest.raises(
        ConfigurationError, match=r"loops 'a' \(stages 1-4\) and 'b' \(stages 3-5\) of"
    ):
        plan(j, 1)

    j = Job("nest")
    a = j.source(KafkaSource("nums")).iterate("a")
    b = a.rebalance().iterate("b")
    tail_b = b.rebalance()
    tail_a = tail_b.rebalance()
    tail_a.sink(KafkaSink("out"))
    b.feed_back(tail_b.filter(not_done))
    a.feed_back(tail_a.filter(not_done))
    assert sorted(plan(j, 1).channel_topics()) == [
        "kstream.nest.s1",
        "kstream.nest.s1.loop",
        "kstream.nest.s2",
        "kstream.nest.s3",
        "kstream.nest.s3.loop",
        "kstream.nest.s4",
        "kstream.nest.s5",
    ]


def test_two_loops_of_one_name_and_nameless_loops_are_refused() -> None:
    j = Job("names")
    s = j.source(KafkaSource("nums"))
    s.iterate("a")
    with pytest.raises(ConfigurationError, match="two loops named 'a'"):
        s.iterate("a")
    with pytest.raises(ConfigurationError, match="non-empty string"):
        s.iterate("")


def test_a_loop_over_timestamped_records_is_refused() -> None:
    j = Job("timed")
    head = j.source(KafkaSource("nums", timestamps="kafka")).iterate("a")
    head.filter(done).sink(KafkaSink("out"))
    head.feed_back(head.filter(not_done))
    with pytest.raises(ConfigurationError, match="loops do not carry event time yet"):
        plan(j, 1)
