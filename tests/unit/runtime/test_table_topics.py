"""A table topic that is not compacted refuses the run, unless the job says so."""

from __future__ import annotations

from kstream import Job, KafkaSink, KafkaSource
from kstream.runtime.runner.preflight import uncompacted_table


def _job(compacted: bool) -> Job:
    job = Job("e")
    visits = job.source(KafkaSource("visits", timestamps="kafka")).key_by(str)
    table = job.source(KafkaSource("profiles", timestamps="kafka")).key_by(str)
    visits.enrich(table, compacted=compacted).sink(KafkaSink("out"))
    return job


def test_a_delete_policy_table_is_refused_with_the_remedy() -> None:
    problem = uncompacted_table(_job(True), {"profiles": "delete"})
    assert problem is not None
    assert "cleanup.policy=delete" in problem
    assert "compacted=False" in problem


def test_compacted_tables_and_tables_declared_uncompacted_pass() -> None:
    assert uncompacted_table(_job(True), {"profiles": "compact"}) is None
    assert uncompacted_table(_job(True), {"profiles": "compact,delete"}) is None
    assert uncompacted_table(_job(False), {"profiles": "delete"}) is None
    # A missing topic is the input check's to refuse, with its own message.
    assert uncompacted_table(_job(True), {}) is None
