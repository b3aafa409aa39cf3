"""Every duration of the job API is an int of ms under a ``_ms`` keyword.

The old keywords (``size=``, ``slide=``, ``offset=``, ``gap=``,
``allowed_lateness=``, ``lower=``/``upper=``, ``snapshot_every=`` in seconds)
still work, each with a `DeprecationWarning` naming the new spelling; a float
is refused with one line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kstream import (
    ConfigurationError,
    Job,
    KafkaSink,
    KafkaSource,
    KeyedStream,
    Session,
    Sliding,
    Source,
    Tumbling,
    session,
    sliding,
    tumbling,
)
from kstream.dataflow.serde import STR, Serde


def keyed(job: Job, topic: str) -> KeyedStream[str, str]:
    return job.source(KafkaSource(topic, timestamps="kafka")).key_by(lambda v: v)


def test_new_spellings_build_the_assigners_without_warnings() -> None:
    assert tumbling(size_ms=60_000, offset_ms=5) == Tumbling(60_000, 5)
    assert sliding(size_ms=60_000, slide_ms=10_000, offset_ms=5) == Sliding(60_000, 10_000, 5)
    assert session(gap_ms=30_000) == Session(30_000)
    assert tumbling(60_000) == Tumbling(60_000)
    assert sliding(60_000, 10_000) == Sliding(60_000, 10_000)
    assert session(30_000) == Session(30_000)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (lambda: tumbling(size=60_000), "size_ms=60000", Tumbling(60_000)),
        (lambda: tumbling(60_000, offset=5), "offset_ms=5", Tumbling(60_000, 5)),
        (lambda: sliding(size=60_000, slide_ms=10_000), "size_ms=60000", Sliding(60_000, 10_000)),
        (lambda: sliding(60_000, slide=10_000), "slide_ms=10000", Sliding(60_000, 10_000)),
        (lambda: sliding(60_000, 10_000, offset=3), "offset_ms=3", Sliding(60_000, 10_000, 3)),
        (lambda: session(gap=30_000), "gap_ms=30000", Session(30_000)),
    ],
)
def test_old_assigner_keywords_warn_and_work(
    old: Callable[[], object], new: str, expected: object
) -> None:
    with pytest.warns(DeprecationWarning, match=f"write {new} ") as caught:
        assert old() == expected
    # The warning points at the job's line, not at kstream.
    assert caught[0].filename == __file__


@pytest.mark.parametrize(
    "call",
    [
        lambda: tumbling(1.5),  # type: ignore[call-overload]
        lambda: tumbling(1_000, 0.5),  # type: ignore[call-overload]
        lambda: sliding(1_000, 2.5),  # type: ignore[call-overload]
        lambda: session(2.5),  # type: ignore[call-overload]
        lambda: session(gap_ms=True),
    ],
)
def test_a_float_duration_is_refused_with_one_line(call: Callable[[], object]) -> None:
    with pytest.raises(ConfigurationError, match="whole number of ms") as raised:
        call()
    assert "\n" not in str(raised.value)


def test_old_and_new_keyword_together_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="give size_ms or the deprecated size, not both"):
        tumbling(1_000, size=2_000)  # type: ignore[call-overload]
    with pytest.raises(ConfigurationError, match="tumbling needs size_ms"):
        tumbling()  # type: ignore[call-overload]


def test_allowed_lateness_keyword_is_deprecated() -> None:
    with pytest.warns(DeprecationWarning, match="write allowed_lateness_ms=5000 ") as caught:
        old = keyed(Job("w"), "in").window(tumbling(1_000), allowed_lateness=5_000)
    assert caught[0].filename == __file__
    new = keyed(Job("w"), "in").window(tumbling(1_000), allowed_lateness_ms=5_000)
    assert old._allowed_lateness == new._allowed_lateness == 5_000
    with pytest.raises(ConfigurationError, match="allowed_lateness_ms must be whole ms"):
        keyed(Job("w"), "in").window(tumbling(1_000), allowed_lateness_ms=0.5).count()  # type: ignore[arg-type]


def test_interval_join_bounds_are_ms_and_lower_upper_are_deprecated() -> None:
    job = Job("j")
    pairs = keyed(job, "a").interval_join(keyed(job, "b"), lower_ms=0, upper_ms=60_000)
    assert pairs._node.kind == "co_process"
    with pytest.warns(DeprecationWarning, match="write (lower|upper)_ms=") as caught:
        keyed(job, "c").interval_join(keyed(job, "d"), lower=0, upper=60_000)
    assert {str(w.message).split(": ")[1] for w in caught} == {
        "write lower_ms=0 (ms)",
        "write upper_ms=60000 (ms)",
    }
    with pytest.raises(ConfigurationError, match=r"interval join's upper_ms is whole ms, got 1\.5"):
        keyed(job, "e").interval_join(keyed(job, "f"), 0, 1.5)  # type: ignore[call-overload]


def test_snapshot_every_is_seconds_and_deprecated() -> None:
    with pytest.warns(
        DeprecationWarning, match="snapshot_every=2.5 is seconds; write snapshot_every_ms=2500"
    ) as caught:
        source = KafkaSource("in", snapshot_every=2.5)
    assert caught[0].filename == __file__
    # Kept in ms, as if it had been written so.
    assert source == KafkaSource("in", snapshot_every_ms=2_500)
    assert source.snapshot_every is None
    with pytest.raises(ConfigurationError, match="not both"):
        KafkaSource("in", snapshot_every=1, snapshot_every_ms=1_000)
    with pytest.raises(ConfigurationError, match="positive number of seconds"):
        KafkaSource("in", snapshot_every=-1)


def test_a_float_snapshot_interval_in_ms_is_refused_with_one_line() -> None:
    with pytest.raises(ConfigurationError, match="snapshot_every_ms must be a whole") as raised:
        KafkaSource("in", snapshot_every_ms=2.5)  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


class SecondsSource(Source[Any]):
    """A source of its own still giving its interval in seconds."""

    topic = "in"
    start = "earliest"
    snapshot_every = 0.25

    @property
    def name(self) -> str:
        return "seconds:in"

    @property
    def serde(self) -> Serde[Any]:
        return STR

    def partitions(self, bootstrap: str) -> int:
        return 1


def test_a_source_of_its_own_in_seconds_warns_and_is_read_in_ms() -> None:
    from kstream.dataflow.inputs import snapshot_every_ms

    with pytest.warns(DeprecationWarning, match="write snapshot_every_ms=250") as caught:
        Job("s").source(SecondsSource()).sink(KafkaSink("out"))
    assert caught[0].filename == __file__
    with pytest.warns(DeprecationWarning, match="is seconds"):
        assert snapshot_every_ms(SecondsSource()) == 250
