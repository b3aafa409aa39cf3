"""`kstream.dataflow.job`: building the graph, where stages are cut, and what is refused."""

from __future__ import annotations

import pytest

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.graph import Node, sink_nodes
from kstream.dataflow.job import Job
from kstream.errors import ConfigurationError


def upper(v: str) -> str:
    return v.upper()


def key(v: str) -> str:
    return v[:1]


# -- names and policies -------------------------------------------------------------


@pytest.mark.parametrize("name", ["two words", "a/b", "a\\b", "a:b", "wörter"])
def test_a_name_that_cannot_scope_topics_is_refused(name: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Job(name)
    assert str(caught.value).startswith(f"job name {name!r} holds ")
    assert isinstance(caught.value, ValueError)


def test_an_empty_or_too_long_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="the job name is empty"):
        Job("")
    with pytest.raises(ConfigurationError, match="has 201 characters; at most 200"):
        Job("j" * 201)
    with pytest.raises(ConfigurationError, match="at most 200"):
        Job("j").rename("j" * 201)


def test_an_unknown_error_policy_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="on_error must be dead-letter, skip or fail"):
        Job("j", on_error="retry")  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["dead-letter", "skip", "fail"])
def test_each_error_policy_is_kept(policy: str) -> None:
    assert Job("j", on_error=policy).on_error == policy  # type: ignore[arg-type]


def test_the_default_policy_is_the_dead_letter_topic() -> None:
    assert Job("j").on_error == "dead-letter"


def test_a_rename_is_validated_like_a_name() -> None:
    job = Job("first")
    job.rename("second")
    assert job.name == "second"
    with pytest.raises(ConfigurationError, match="holds ' '"):
        job.rename("bad name")
    assert job.name == "second"


# -- stage cuts -----------------------------------------------------------------


def test_operators_fuse_into_one_stage_until_key_by_or_rebalance() -> None:
    job = Job("cuts")
    src = KafkaSource("in")
    (
        job.source(src, parallelism=2)
        .map(upper)
        .filter(bool)
        .key_by(key, parallelism=3)
        .process(lambda k, v, s: [v], name="p")
        .rebalance()
        .flat_map(str.split)
        .sink(KafkaSink("out"))
    )
    s0, s1, s2 = job.stages
    assert [s.index for s in job.stages] == [0, 1, 2]
    assert (s0.source, s0.upstream, s0.key_fn, s0.parallelism) == (src, None, None, 2)
    assert (s1.source, s1.upstream, s1.key_fn, s1.parallelism) == (None, s0, key, 3)
    assert (s2.source, s2.upstream, s2.key_fn, s2.parallelism) == (None, s1, None, None)
    assert [s.keyed for s in job.stages] == [False, True, False]

    def chain(root: Node) -> list[str]:
        kinds, node = [], root
        while node.children:
            kinds.append(node.kind)
            (node,) = node.children
        return [*kinds, node.kind]

    assert chain(s0.root) == ["source", "map", "filter", "edge"]
    assert chain(s1.root) == ["input", "process", "edge"]
    assert chain(s2.root) == ["input", "flat_map", "sink"]
    edge0 = s0.root.children[0].children[0].children[0]
    assert edge0.edge_to is s1
    assert s0.root.children[0].fn is upper


def test_sink_nodes_are_listed_depth_first_in_child_order() -> None:
    job = Job("fan")
    stream = job.source(KafkaSource("in"))
    a, b, c = KafkaSink("a"), KafkaSink("b"), KafkaSink("c")
    mapped = stream.map(upper)
    mapped.filter(bool).sink(a)
    mapped.sink(b)
    stream.sink(c)
    assert [n.sink for n in sink_nodes(job.stages[0].root)] == [a, b, c]


# -- validation -----------------------------------------------------------------


def test_a_job_without_a_source_cannot_run() -> None:
    with pytest.raises(ConfigurationError, match=r"^job lonely has no source$"):
        Job("lonely").validate()


def test_a_stage_that_leads_nowhere_cannot_run() -> None:
    job = Job("j")
    job.source(KafkaSource("in")).map(upper)
    with pytest.raises(ConfigurationError, match=r"^stage 0 of job j has no sink$"):
        job.validate()


def test_the_stage_after_a_cut_needs_a_sink_too() -> None:
    job = Job("j")
    job.source(KafkaSource("in")).key_by(key).process(lambda k, v, s: [v])
    with pytest.raises(ConfigurationError, match=r"^stage 1 of job j has no sink$"):
        job.validate()


def test_a_stage_that_ends_in_an_edge_is_complete() -> None:
    job = Job("j")
    job.source(KafkaSource("in")).rebalance().sink(KafkaSink("out"))
    job.validate()


@pytest.mark.parametrize("where", ["source", "key_by", "rebalance"])
@pytest.mark.parametrize("parallelism", [0, -2])
def test_a_parallelism_below_one_is_refused(where: str, parallelism: int) -> None:
    job = Job("j")
    stream = job.source(KafkaSource("in"), parallelism=parallelism if where == "source" else None)
    if where == "key_by":
        stream.key_by(key, parallelism=parallelism).process(lambda k, v, s: [v]).sink(
            KafkaSink("out")
        )
    elif where == "rebalance":
        stream.rebalance(parallelism=parallelism).sink(KafkaSink("out"))
    else:
        stream.sink(KafkaSink("out"))
    with pytest.raises(ConfigurationError, match=rf"^parallelism must be >= 1, got {parallelism}$"):
        job.validate()


def test_a_keyed_stream_feeds_exactly_one_process_function() -> None:
    keyed = Job("j").source(KafkaSource("in")).key_by(key)
    keyed.process(lambda k, v, s: [v])
    with pytest.raises(ConfigurationError) as caught:
        keyed.process(lambda k, v, s: [v])
    assert str(caught.value) == (
        "a keyed stream feeds exactly one process function (the key's state is that "
        "function's): call key_by again on the stream for another function"
    )


def test_two_functions_on_the_same_keys_take_a_key_by_each() -> None:
    # The way out the refusal names (docs/guide/jobs.md too): one keyed stage per function.
    job = Job("j")
    stream = job.source(KafkaSource("in"))
    stream.key_by(key).count(name="first").sink(KafkaSink("a"))
    stream.key_by(key).count(name="second").sink(KafkaSink("b"))
    job.validate()
    assert [s.upstream.index if s.upstream else None for s in job.stages] == [None, 0, 0]
