"""The job API as a graph: several sources, union, connect, fan-out, side outputs,
and the one-line refusals of what cannot run."""

from __future__ import annotations

from typing import Any

import pytest

from kstream import ConfigurationError, Job, KafkaSink, KafkaSource, Tagged
from kstream.dataflow.graph import sink_nodes
from kstream.dataflow.plan import plan, started_with
from kstream.dataflow.stream import ConnectedStreams, KeyedStream, Stream


def echo(key: Any, value: Any, state: Any) -> list[Any]:
    return [value]


def first(value: str) -> str:
    return value[0]


def connected(name: str = "co") -> tuple[Job, Stream]:
    j = Job(name)
    a = j.source(KafkaSource("a")).key_by(first)
    b = j.source(KafkaSource("b")).map(str.upper).key_by(str.lower)
    out = a.connect(b).process(echo, echo, name="match")
    out.sink(KafkaSink("out"))
    return j, out


def test_each_source_is_its_own_stage_with_its_own_serde_and_start() -> None:
    j = Job("two")
    j.source(KafkaSource("a", value_serde="json")).sink(KafkaSink("x"))
    j.source(KafkaSource("b", start="latest")).sink(KafkaSink("y"))
    a, b = (s.source for s in j.stages)
    assert a is not None
    assert b is not None
    assert (a.topic, a.value_serde, a.start) == ("a", "json", "earliest")
    assert (b.topic, b.value_serde, b.start) == ("b", "str", "latest")
    assert plan(j, 2).channel_topics() == {}


def test_connect_is_one_keyed_stage_after_both_sources_with_each_sides_key_fn() -> None:
    j, _ = connected()
    assert [s.source.topic if s.source else None for s in j.stages] == ["a", "b", None]
    stage = j.stages[2]
    assert [(i.upstream.index, i.key_fn, i.index, i.side) for i in stage.inputs] == [
        (0, first, 0, 0),
        (1, str.lower, 1, 1),
    ]
    # Each upstream's edge node writes the input it feeds.
    assert [(i.edge.edge_to, i.edge.edge_input) for i in stage.inputs] == [(stage, 0), (stage, 1)]
    assert stage.root.children[0].kind == "co_process"
    assert stage.root.children[0].fns == (echo, echo)
    j.validate()


def test_each_input_has_its_own_channel_topic_sized_by_its_upstream() -> None:
    j = Job("u")
    a = j.source(KafkaSource("a"), parallelism=2)
    b = j.source(KafkaSource("b"), parallelism=3)
    a.union(b, parallelism=4).sink(KafkaSink("out"))
    p = plan(j, 1)
    assert p.channel_topics() == {"kstream.u.s2": 8, "kstream.u.s2.i1": 12}
    # Subtask 1 of 4 reads, per input, one channel per upstream subtask.
    from kstream.dataflow.plan import TaskSpec

    assert p.input_channels(TaskSpec(2, 1, 4)) == [
        ("kstream.u.s2", [1, 5]),
        ("kstream.u.s2.i1", [1, 5, 9]),
    ]
    assert sum(p.internal_topics().values()) == 8 + 12 + 1 + 1 + 4


def test_a_restart_with_another_worker_count_is_found_on_a_second_input_topic() -> None:
    j, _ = connected()
    existing = plan(j, 2).internal_topics()
    assert started_with(j, existing, 2) is None
    del existing["kstream.co.s2"]  # only the second input's topic tells the layout
    problem = started_with(j, existing, 3)
    assert problem is not None
    assert problem.startswith("job co was started with 2 workers (kstream.co.s2.i1 has 4")


def test_unkeyed_union_feeds_a_new_round_robin_stage_one_input_per_member() -> None:
    j = Job("u")
    s = j.source(KafkaSource("a"))
    left, right = s.map(str.upper), s.map(str.lower)
    other = j.source(KafkaSource("b"))
    left.union(right, other).sink(KafkaSink("out"))
    stage = j.stages[2]
    assert not stage.keyed
    assert [(i.upstream.index, i.key_fn) for i in stage.inputs] == [(0, None), (0, None), (1, None)]
    assert [c.kind for c in left._node.children] == ["edge"]


def test_keyed_union_is_one_hop_keeping_each_members_key_fn() -> None:
    j = Job("ku")
    a = j.source(KafkaSource("a")).key_by(first)
    b = j.source(KafkaSource("b")).key_by(str.lower)
    a.union(b).process(echo).sink(KafkaSink("out"))
    assert len(j.stages) == 3  # two sources and one keyed stage, no extra hop
    assert [(i.key_fn, i.side) for i in j.stages[2].inputs] == [(first, 0), (str.lower, 0)]
    assert [s.index for s in j.stages] == [0, 1, 2]


def test_a_keyed_union_may_be_one_side_of_a_connect() -> None:
    j = Job("kuc")
    a = j.source(KafkaSource("a")).key_by(first)
    b = j.source(KafkaSource("b")).key_by(first)
    c = j.source(KafkaSource("c")).key_by(first)
    a.connect(b.union(c)).process(echo, echo).sink(KafkaSink("out"))
    keyed = j.stages[-1]
    assert [(i.upstream.source.topic, i.side) for i in keyed.inputs if i.upstream.source] == [
        ("a", 0),
        ("b", 1),
        ("c", 1),
    ]
    j.validate()


def test_fan_out_to_several_stages_and_sinks() -> None:
    j = Job("fan")
    s = j.source(KafkaSource("a")).map(str.strip)
    s.sink(KafkaSink("raw"))
    s.key_by(first).process(echo).sink(KafkaSink("keyed"))
    s.rebalance().sink(KafkaSink("spread"))
    assert [c.kind for c in s._node.children] == ["sink", "edge", "edge"]
    assert [i.upstream.index for st in j.stages[1:] for i in st.inputs] == [0, 0]
    assert plan(j, 2).channel_topics() == {"kstream.fan.s1": 4, "kstream.fan.s2": 4}


def test_side_outputs_are_streams_of_the_same_stage_listed_after_the_main_output() -> None:
    j, out = connected()
    late = out.side_output("late")
    assert out.side_output("late")._node is late._node  # one stream per tag
    late.map(str.upper).sink(KafkaSink("late"))
    out.side_output("early").sink(KafkaSink("early"))
    assert [n.name for n in sink_nodes(j.stages[2].root)] == [
        "kafka:out",
        "kafka:early",
        "kafka:late",
    ]
    assert Tagged("late", 1) == Tagged("late", 1)
    with pytest.raises(AttributeError):
        Tagged("late", 1).tag = "x"  # type: ignore[misc]


def test_a_stage_with_only_a_side_output_sink_is_complete() -> None:
    j = Job("side")
    j.source(KafkaSource("a")).key_by(first).process(echo).side_output("x").sink(KafkaSink("o"))
    j.validate()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda j, a, b: a.key_by(first).connect(b),
            "connect of a keyed stream with an unkeyed one",
        ),
        (
            lambda j, a, b: a.union(b.key_by(first)),
            "union of an unkeyed stream with a keyed one",
        ),
        (
            lambda j, a, b: a.key_by(first).union(b),
            "union of a keyed stream with an unkeyed one",
        ),
        (
            lambda j, a, b: (k := a.key_by(first)).connect(k),
            "connect of a keyed stream with itself",
        ),
        (
            lambda j, a, b: a.union(a),
            "union of a stream with itself",
        ),
        (
            lambda j, a, b: a.side_output("x"),
            "side_output('x') follows a process function, not a source operator",
        ),
        (
            lambda j, a, b: a.key_by(first).process(echo).side_output(""),
            "a side output's tag is a non-empty string",
        ),
        (
            lambda j, a, b: a.union(Job("other").source(KafkaSource("c"))),
            "union of streams of two different jobs",
        ),
        (
            lambda j, a, b: a.key_by(first, parallelism=2).connect(b.key_by(first, parallelism=3)),
            "cannot merge keyed streams of parallelism 2 and 3",
        ),
    ],
)
def test_what_cannot_run_is_refused_with_one_line(build: Any, message: str) -> None:
    j = Job("bad")
    a, b = j.source(KafkaSource("a")), j.source(KafkaSource("b"))
    with pytest.raises(
        ConfigurationError, match="^" + message.replace("(", r"\(").replace(")", r"\)")
    ) as caught:
        build(j, a, b)
    assert "\n" not in str(caught.value)


def test_only_keyed_streams_connect() -> None:
    # The type checker refuses it before the run: a Stream has no connect.
    j = Job("bad")
    a, b = j.source(KafkaSource("a")), j.source(KafkaSource("b"))
    assert not hasattr(a, "connect")
    with pytest.raises(AttributeError, match="connect"):
        a.connect(b)  # type: ignore[attr-defined]
    assert isinstance(a.key_by(first).connect(b.key_by(first)), ConnectedStreams)


def test_a_merged_keyed_stream_is_spent() -> None:
    j = Job("spent")
    a = j.source(KafkaSource("a")).key_by(first)
    b = j.source(KafkaSource("b")).key_by(first)
    co = a.connect(b)
    for use in (lambda: b.process(echo), lambda: a.union(b), lambda: a.process(echo)):
        with pytest.raises(ConfigurationError, match="already united or connected; use the result"):
            use()
    co.process(echo, echo).sink(KafkaSink("o"))
    with pytest.raises(ConfigurationError, match="connected streams feed exactly one co-process"):
        co.process(echo, echo)


def test_a_keyed_stream_already_processed_cannot_be_merged() -> None:
    j = Job("late")
    a = j.source(KafkaSource("a")).key_by(first)
    a.process(echo).sink(KafkaSink("o"))
    b = j.source(KafkaSource("b")).key_by(first)
    with pytest.raises(ConfigurationError, match="already feeds a function"):
        a.connect(b)


def test_stage_order_is_topological_so_no_cycle_can_be_built() -> None:
    # Edges only go from existing stages to new ones (merges move the merged
    # stage after its inputs): every input's upstream comes first.
    j = Job("order")
    a = j.source(KafkaSource("a")).key_by(first)
    b = j.source(KafkaSource("b")).key_by(first)
    # b's stage (3) is merged into a's (1), which moves after both sources.
    out = a.connect(b).process(echo, echo)
    out.key_by(first).process(echo).sink(KafkaSink("o"))
    for stage in j.stages:
        assert all(i.upstream.index < stage.index for i in stage.inputs)
    assert [s.source is None for s in j.stages] == [False, False, True, True]
    # A hand-made edge from stage 3 back into stage 2 is refused as a cycle.
    j.stages[2].inputs.append(j.stages[3].inputs[0])
    with pytest.raises(ConfigurationError, match="a cycle"):
        j.validate()


def test_the_public_types_are_what_the_api_returns() -> None:
    j = Job("types")
    s = j.source(KafkaSource("a"))
    assert isinstance(s.key_by(first), KeyedStream)
