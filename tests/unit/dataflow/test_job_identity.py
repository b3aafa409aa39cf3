"""`kstream.dataflow.identity`: what a checkpoint records of its job, what may differ on resume."""

from __future__ import annotations

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.identity import FORMAT_VERSION, JobIdentity, resume_problems
from kstream.dataflow.job import Job
from kstream.dataflow.plan import plan


def wordcount(source: str = "a", sink: str = "out", op: str = "count") -> Job:
    j = Job("wc")
    (
        j.source(KafkaSource(source))
        .flat_map(str.split)
        .key_by(lambda w: w)
        .process(lambda k, v, s: [v], name=op)
        .sink(KafkaSink(sink))
    )
    return j


def identity(job: Job, workers: int = 2) -> JobIdentity:
    return JobIdentity.of(plan(job, workers))


def test_identity_names_sources_sinks_operators_and_parallelism() -> None:
    ident = identity(wordcount())
    assert ident == JobIdentity(
        FORMAT_VERSION,
        (2, 2),
        ("kafka:a",),
        ("kafka:out",),
        ("s0.flat_map:flat_map", "s0.edge:", "s1.process:count"),
    )
    assert JobIdentity.from_json(ident.to_json()) == ident
    assert ident.fingerprint == identity(wordcount()).fingerprint
    assert ident.fingerprint != identity(wordcount(source="b")).fingerprint


def test_the_same_job_resumes() -> None:
    assert resume_problems(identity(wordcount()), identity(wordcount())) == ([], [])


def test_other_topics_or_operators_resume_only_on_purpose() -> None:
    fatal, changed = resume_problems(
        identity(wordcount()), identity(wordcount(source="b", op="total"))
    )
    assert fatal == []
    assert changed == [
        "sources kafka:a -> kafka:b",
        "operators s0.flat_map:flat_map, s0.edge:, s1.process:count -> "
        "s0.flat_map:flat_map, s0.edge:, s1.process:total",
    ]


def test_parallelism_format_or_no_identity_never_resume() -> None:
    fatal, _ = resume_problems(identity(wordcount(), 2), identity(wordcount(), 3))
    assert fatal == [
        "parallelism per stage [2, 2] -> [3, 3] (rescaling a checkpoint is not supported)"
    ]
    old = JobIdentity(1, (2, 2), ("kafka:a",), ("kafka:out",), ())
    fatal, _ = resume_problems(old, identity(wordcount()))
    assert fatal[0] == f"checkpoint format 1, this kstream writes {FORMAT_VERSION}"
    fatal, _ = resume_problems(None, identity(wordcount()))
    assert "no job identity" in fatal[0]
