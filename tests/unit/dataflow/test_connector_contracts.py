"""`Source` and `Sink` are complete contracts: declared, enforced, implemented by Kafka's."""

from __future__ import annotations

from typing import Any

import pytest

from kstream import ConfigurationError, Job, KafkaSink, KafkaSource, Sink, Source
from kstream.dataflow.outputs import SinkContext, SinkSnapshot, SinkWriter
from kstream.dataflow.serde import STR, Serde


class _Writer(SinkWriter):
    def write(self, value: Any) -> None:
        pass

    def pre_commit(self, epoch: int) -> SinkSnapshot:
        return SinkSnapshot()


class _ListSink(Sink):
    """The least a sink must say: a name and how to open a writer."""

    @property
    def name(self) -> str:
        return "list"

    def open(self, ctx: SinkContext) -> SinkWriter:
        return _Writer()


class _TopicSource(Source):
    topic = "t"
    start = "latest"

    @property
    def name(self) -> str:
        return "topic:t"

    @property
    def serde(self) -> Serde:
        return STR

    def partitions(self, bootstrap: str) -> int:
        return 1


def test_a_sink_reads_no_commit_markers_unless_it_says_so() -> None:
    assert _ListSink().commit_markers is False


def test_an_incomplete_sink_cannot_be_made() -> None:
    class NoOpen(Sink):
        @property
        def name(self) -> str:
            return "x"

    with pytest.raises(TypeError, match="open"):
        NoOpen()  # type: ignore[abstract]


def test_an_incomplete_source_cannot_be_made() -> None:
    class NoPartitions(Source):
        @property
        def name(self) -> str:
            return "x"

        @property
        def serde(self) -> Serde:
            return STR

    with pytest.raises(TypeError, match="partitions"):
        NoPartitions()  # type: ignore[abstract]


def test_a_sinks_optional_members_default_to_nothing() -> None:
    sink = _ListSink()
    assert sink.lineage is False
    assert sink.topics() == ()
    sink.check("unused:9092")  # nothing to check


def test_a_job_refuses_what_is_not_a_source_or_sink() -> None:
    class LooksLikeASource:
        name = "duck"

        def partitions(self, bootstrap: str) -> int:
            return 1

    job = Job("contracts")
    with pytest.raises(ConfigurationError, match="is not a kstream Source"):
        job.source(LooksLikeASource())  # type: ignore[arg-type]
    stream = job.source(_TopicSource())
    with pytest.raises(ConfigurationError, match="is not a kstream Sink"):
        stream.sink(object())  # type: ignore[arg-type]
    stream.sink(_ListSink())
    job.validate()


def test_the_kafka_connectors_implement_the_contracts() -> None:
    source = KafkaSource("in", value_serde="json", start="latest")
    assert isinstance(source, Source)
    assert (source.topic, source.start, source.serde.name) == ("in", "latest", "json")
    sink = KafkaSink("out", lineage=True)
    assert isinstance(sink, Sink)
    assert (sink.name, sink.lineage, sink.topics()) == ("kafka:out", True, ("out",))
    assert KafkaSink("out").lineage is False
    with pytest.raises(TypeError):
        KafkaSink()  # type: ignore[call-arg]
