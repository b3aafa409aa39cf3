"""`Stream.uid`: the name a keyed operator's state is stored under."""

from __future__ import annotations

import pytest

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.identity import state_names
from kstream.dataflow.job import Job
from kstream.errors import ConfigurationError


def job(uid: str | None = None, name: str = "count") -> Job:
    j = Job("wc")
    keyed = j.source(KafkaSource("in")).flat_map(str.split).key_by(lambda w: w)
    counted = keyed.process(lambda k, v, s: [v], name=name)
    if uid is not None:
        counted = counted.uid(uid)
    counted.sink(KafkaSink("out"))
    return j


def test_state_is_stored_under_the_operator_name_by_default() -> None:
    assert state_names(job()) == ("s1.count",)


def test_a_uid_replaces_the_name_so_a_rename_keeps_the_state() -> None:
    assert state_names(job(uid="counter")) == ("s1.counter",)
    assert state_names(job(uid="counter", name="tally")) == state_names(job(uid="counter"))


def test_a_uid_follows_a_keyed_operator_only() -> None:
    j = Job("wc")
    with pytest.raises(ConfigurationError, match="follows a process function"):
        j.source(KafkaSource("in")).map(str.upper).uid("x")


@pytest.mark.parametrize("bad", ["", "a.b", "a/b"])
def test_a_malformed_uid_is_refused(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="operator uid"):
        job(uid=bad)
