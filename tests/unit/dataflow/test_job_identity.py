"""`kstream.dataflow.identity`: what a checkpoint records of its job, what may differ on resume."""

from __future__ import annotations

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.identity import identity_of
from kstream.dataflow.job import Job
from kstream.dataflow.plan import plan
from kstream.protocol.identity import FORMAT_VERSION, JobIdentity, resume_problems


def wordcount(
    source: str = "a", sink: str = "out", op: str = "count", max_parallelism: int = 128
) -> Job:
    j = Job("wc", max_parallelism=max_parallelism)
    (
        j.source(KafkaSource(source))
        .flat_map(str.split)
        .key_by(lambda w: w)
        .process(lambda k, v, s: [v], name=op)
        .sink(KafkaSink(sink))
    )
    return j


def identity(job: Job, workers: int = 2) -> JobIdentity:
    return identity_of(plan(job, workers))


def test_identity_names_sources_sinks_operators_and_parallelism() -> None:
    ident = identity(wordcount())
    assert ident == JobIdentity(
        FORMAT_VERSION,
        (2, 2),
        ("kafka:a",),
        ("kafka:out",),
        ("s0.flat_map:flat_map", "s0.edge:", "s1.process:count"),
        max_parallelism=128,
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


def test_a_job_with_key_groups_resumes_at_another_parallelism_not_another_max() -> None:
    assert resume_problems(identity(wordcount(), 2), identity(wordcount(), 3)) == ([], [])
    # Its snapshots are of one job whatever the parallelism.
    assert identity(wordcount(), 2).fingerprint == identity(wordcount(), 3).fingerprint
    fatal, _ = resume_problems(
        identity(wordcount(), 2), identity(wordcount(max_parallelism=256), 2)
    )
    assert fatal == [
        "max parallelism 128 -> 256 (the number of key groups is fixed for the life of the state)"
    ]


def test_a_checkpoint_without_key_groups_keeps_its_parallelism() -> None:
    # Recorded by a kstream before key groups: no max_parallelism in its JSON.
    form = identity(wordcount(), 2).to_json()
    del form["max_parallelism"]
    legacy = JobIdentity.from_json(form)
    assert legacy.max_parallelism == 0
    assert resume_problems(legacy, identity(wordcount(), 2)) == ([], [])
    fatal, _ = resume_problems(legacy, identity(wordcount(), 3))
    assert fatal == [
        "parallelism per stage [2, 2] -> [3, 3]: the checkpoint was taken by a kstream "
        "without key groups and cannot be rescaled; run with its parallelism, "
        "or start it fresh (--fresh)"
    ]


def test_format_or_no_identity_never_resume() -> None:
    old = JobIdentity(1, (2, 2), ("kafka:a",), ("kafka:out",), ())
    fatal, _ = resume_problems(old, identity(wordcount()))
    assert fatal[0] == f"checkpoint format 1, this kstream writes {FORMAT_VERSION}"
    fatal, _ = resume_problems(None, identity(wordcount()))
    assert "no job identity" in fatal[0]


def test_a_line_jobs_fingerprint_is_the_one_it_had_before_graphs() -> None:
    # Computed by the identity code before stages had several inputs: checkpoints
    # of single-input jobs taken then still resume (an identity without key groups).
    form = identity(wordcount()).to_json()
    del form["max_parallelism"]
    assert JobIdentity.from_json(form).fingerprint == "791fe7ddf1911d1e"
    assert "edges" not in identity(wordcount()).to_json()


def connected(second_key: str = "b") -> Job:
    j = Job("co")
    a = j.source(KafkaSource("a")).key_by(lambda v: v)
    b = j.source(KafkaSource(second_key)).key_by(lambda v: v)
    out = a.connect(b).process(lambda k, v, s: [v], lambda k, v, s: [v], name="match")
    out.sink(KafkaSink("out"))
    out.side_output("late").sink(KafkaSink("late"))
    return j


def test_a_graphs_identity_names_its_edges_and_side_outputs() -> None:
    ident = identity(connected())
    assert ident.edges == ("s0>s2.i0:keyed", "s1>s2.i1:keyed/side1")
    assert ident.operators == ("s0.edge:", "s1.edge:", "s2.co_process:match", "s2.side:late")
    assert ident.sinks == ("kafka:out", "kafka:late")
    assert JobIdentity.from_json(ident.to_json()) == ident


def test_the_same_operators_wired_otherwise_resume_only_on_purpose() -> None:
    j = Job("co")
    a = j.source(KafkaSource("a")).key_by(lambda v: v)
    b = j.source(KafkaSource("b")).key_by(lambda v: v)
    out = b.connect(a).process(lambda k, v, s: [v], lambda k, v, s: [v], name="match")
    out.sink(KafkaSink("out"))
    out.side_output("late").sink(KafkaSink("late"))
    fatal, changed = resume_problems(identity(connected()), identity(j))
    assert fatal == []
    assert changed == [
        "edges s0>s2.i0:keyed, s1>s2.i1:keyed/side1 -> s1>s2.i0:keyed, s0>s2.i1:keyed/side1"
    ]
    assert identity(connected()).fingerprint != identity(j).fingerprint
