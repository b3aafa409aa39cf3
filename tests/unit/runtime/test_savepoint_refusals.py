"""`kstream.runtime.runner.from_savepoint.refusals`: which savepoints a job may start from."""

from __future__ import annotations

import dataclasses

from kstream.protocol.identity import JobIdentity
from kstream.runtime.checkpoint.savepoint import FORMAT_VERSION, SavepointInfo
from kstream.runtime.runner.from_savepoint import refusals

JOB = JobIdentity(
    1, (2, 2), ("kafka:in",), ("kafka:out",), ("s0.flat_map:flat_map", "s1.process:count"), (), 128
)
SAVED = SavepointInfo(FORMAT_VERSION, "a", 7, JOB, 128, (2, 2), "msgpack", 1.0, ("s1.count",))


def why(
    identity: JobIdentity = JOB,
    serde: str = "msgpack",
    states: tuple[str, ...] = ("s1.count",),
    *,
    accept: bool = False,
    allow: bool = False,
) -> list[str]:
    return refusals(
        SAVED, identity, serde, states, accept_changes=accept, allow_non_restored_state=allow
    )


def test_the_same_job_at_another_parallelism_may_start() -> None:
    assert why() == []
    assert why(dataclasses.replace(JOB, parallelism=(3, 1))) == []


def test_another_max_parallelism_or_state_serde_is_refused() -> None:
    [keys] = why(dataclasses.replace(JOB, max_parallelism=256))
    assert "key groups" in keys
    [serde] = why(serde="pickle")
    assert "'msgpack'" in serde


def test_renamed_operators_are_judged_by_their_state_not_their_names() -> None:
    renamed = dataclasses.replace(JOB, operators=("s0.flat_map:split", "s1.process:tally"))
    assert why(renamed) == []  # a uid kept the state name
    [lost] = why(renamed, states=("s1.tally",))
    assert "s1.count" in lost
    assert why(renamed, states=("s1.tally",), allow=True) == []


def test_other_sources_or_sinks_need_accept_changes() -> None:
    other = dataclasses.replace(JOB, sources=("kafka:elsewhere",))
    [changed] = why(other)
    assert "sources kafka:in -> kafka:elsewhere" in changed
    assert why(other, accept=True) == []
