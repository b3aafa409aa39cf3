"""`kstream.dataflow.plan`: parallelism, subtasks per worker, channels, markers, topics."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.plan import MAX_INTERNAL_PARTITIONS, TaskSpec, plan, started_with
from kstream.errors import ConfigurationError


def pipeline(
    *stages: int | None,
    name: str = "p",
    parallelism: int | None = None,
    sinks: int = 1,
    max_parallelism: int = 128,
) -> Job:
    """A chain of stages with the given parallelism (source first, then `key_by`s).

    The last stage writes to `sinks` sinks.
    """
    job = Job(name, parallelism=parallelism, max_parallelism=max_parallelism)
    stream = job.source(KafkaSource("in"), parallelism=stages[0])
    for p in stages[1:]:
        stream = stream.key_by(lambda v: v, parallelism=p).process(lambda k, v, s: [v])
    for i in range(sinks):
        stream.sink(KafkaSink(f"out{i}"))
    return job


# -- parallelism and subtasks ---------------------------------------------------


def test_a_stage_without_parallelism_gets_one_subtask_per_worker() -> None:
    assert plan(pipeline(None, None), 3).parallelism == (3, 3)


def test_the_jobs_parallelism_beats_the_worker_count() -> None:
    assert plan(pipeline(None, None, parallelism=2), 5).parallelism == (2, 2)


def test_a_stages_own_parallelism_beats_the_jobs() -> None:
    assert plan(pipeline(4, None, parallelism=2), 5).parallelism == (4, 2)


def test_subtasks_are_listed_by_stage_then_index() -> None:
    p = plan(pipeline(2, 1), 2)
    assert p.tasks == [TaskSpec(0, 0, 2), TaskSpec(0, 1, 2), TaskSpec(1, 0, 1)]
    assert [t.id for t in p.tasks] == ["s0-0", "s0-1", "s1-0"]


def test_subtask_i_of_every_stage_runs_on_worker_i_modulo_workers() -> None:
    p = plan(pipeline(5, 1), 2)
    assert [t.id for t in p.tasks_of(0)] == ["s0-0", "s0-2", "s0-4", "s1-0"]
    assert [t.id for t in p.tasks_of(1)] == ["s0-1", "s0-3"]
    assert p.tasks_of(2) == []


def test_a_placed_stage_starts_on_its_worker() -> None:
    job = Job("placed", parallelism=1)
    src = job.source(KafkaSource("in")).on_worker(0)
    src.key_by(lambda v: v).process(lambda k, v, s: [v]).on_worker(1).sink(KafkaSink("out"))
    p = plan(job, 2)
    assert [t.id for t in p.tasks_of(0)] == ["s0-0"]
    assert [t.id for t in p.tasks_of(1)] == ["s1-0"]
    # One worker: everything on it, wherever placed.
    assert [t.id for t in plan(job, 1).tasks_of(0)] == ["s0-0", "s1-0"]


def test_a_stage_is_placed_on_a_worker_index_not_below_zero() -> None:
    with pytest.raises(ConfigurationError, match="on_worker takes a worker index >= 0, got -1"):
        Job("placed").source(KafkaSource("in")).on_worker(-1)


@given(
    stages=st.lists(st.one_of(st.none(), st.integers(1, 6)), min_size=1, max_size=4),
    workers=st.integers(1, 6),
)
def test_every_subtask_runs_on_exactly_one_worker(stages: list[int | None], workers: int) -> None:
    job = pipeline(*stages)
    for i, stage in enumerate(job.stages):
        stage.worker = i * 7 % 5  # placed or not, each subtask once
    p = plan(job, workers)
    placed = Counter(t for w in range(workers) for t in p.tasks_of(w))
    assert placed == Counter(p.tasks)
    assert all(n == 1 for n in placed.values())


# -- channels -------------------------------------------------------------------


def test_each_edge_is_a_topic_of_upstream_times_downstream_partitions() -> None:
    p = plan(pipeline(2, 3, 4, name="j"), 1)
    assert p.channel_topics() == {"kstream.j.s1": 6, "kstream.j.s2": 12}


def test_a_downstream_subtask_reads_one_channel_per_upstream_subtask() -> None:
    p = plan(pipeline(2, 3, name="j"), 1)
    assert p.input_channels(TaskSpec(1, 0, 3)) == [("kstream.j.s1", [0, 3])]
    assert p.input_channels(TaskSpec(1, 2, 3)) == [("kstream.j.s1", [2, 5])]


def test_a_source_stage_reads_no_channels() -> None:
    p = plan(pipeline(2, 3), 1)
    with pytest.raises(ConfigurationError, match="stage 0 reads a source, not channels"):
        p.input_channels(TaskSpec(0, 0, 2))


@given(up=st.integers(1, 8), down=st.integers(1, 8))
def test_the_channels_of_an_edge_are_read_by_exactly_one_subtask(up: int, down: int) -> None:
    p = plan(pipeline(up, down), 1)
    read = [part for j in range(down) for part in p.input_channels(TaskSpec(1, j, down))[0][1]]
    assert sorted(read) == list(range(up * down))
    # Partition i*D + j is written by upstream i (see ChannelWriter) and read by j.
    for j in range(down):
        parts = p.input_channels(TaskSpec(1, j, down))[0][1]
        assert [(part // down, part % down) for part in parts] == [(i, j) for i in range(up)]


# -- commit markers and internal topics ----------------------------------------


def test_every_sink_subtask_owns_its_own_marker_partition() -> None:
    job = Job("m")
    s0 = job.source(KafkaSource("in"), parallelism=2)
    s0.sink(KafkaSink("a"))
    s0.sink(KafkaSink("b"))
    s0.key_by(lambda v: v, parallelism=3).process(lambda k, v, s: [v]).sink(KafkaSink("c"))
    p = plan(job, 1)
    owners = {
        (t.id, ordinal): p.marker_partition(t, ordinal)
        for t in p.tasks
        for ordinal in range(2 if t.stage == 0 else 1)
    }
    assert owners == {
        ("s0-0", 0): 0,
        ("s0-1", 0): 1,
        ("s0-0", 1): 2,
        ("s0-1", 1): 3,
        ("s1-0", 0): 4,
        ("s1-1", 0): 5,
        ("s1-2", 0): 6,
    }
    assert p.sink_subtasks() == 7
    assert p.internal_topics()["kstream.m.commits"] == 7


def test_a_subtask_names_its_sinks_in_the_order_it_opens_them() -> None:
    p = plan(pipeline(2, 2, sinks=2), 1)
    assert p.sink(TaskSpec(1, 1, 2), 0) == KafkaSink("out0")
    assert p.sink(TaskSpec(1, 1, 2), 1) == KafkaSink("out1")
    with pytest.raises(ConfigurationError, match="s0-0 has no sink number 0"):
        p.sink(TaskSpec(0, 0, 2), 0)
    with pytest.raises(ConfigurationError, match="s1-0 has no sink number 2"):
        p.sink(TaskSpec(1, 0, 2), 2)


def test_a_sink_number_a_subtask_does_not_have_is_refused() -> None:
    p = plan(pipeline(2, 2), 1)
    with pytest.raises(ConfigurationError, match="s0-1 has no sink number 0"):
        p.marker_partition(TaskSpec(0, 1, 2), 0)
    with pytest.raises(ConfigurationError, match="s1-0 has no sink number 1"):
        p.marker_partition(TaskSpec(1, 0, 2), 1)


def test_the_internal_topics_are_channels_control_dead_letters_and_commits() -> None:
    p = plan(pipeline(None, None, name="wc", sinks=2), 3)
    assert p.internal_topics() == {
        "kstream.wc.s1": 9,
        "kstream.wc.control": 1,
        "kstream.wc.dead-letters": 1,
        "kstream.wc.commits": 6,
    }


def test_a_stage_is_found_by_its_subtask() -> None:
    job = pipeline(1, 2)
    assert plan(job, 1).stage(TaskSpec(1, 1, 2)) is job.stages[1]


# -- refusals ---------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, -1])
def test_fewer_than_one_worker_is_refused(workers: int) -> None:
    with pytest.raises(ConfigurationError, match=f"--workers must be >= 1, got {workers}"):
        plan(pipeline(None), workers)


def test_the_plan_validates_the_job() -> None:
    with pytest.raises(ConfigurationError, match="job empty has no source"):
        plan(Job("empty"), 1)


def test_fixed_parallelism_beyond_what_kafka_creates_says_to_lower_it() -> None:
    job = pipeline(200, 60, name="big", max_parallelism=256)
    with pytest.raises(ConfigurationError) as caught:
        plan(job, 1)
    message = str(caught.value)
    assert message.startswith("--workers 1 needs 12,062 partitions")
    assert "(kstream.big.s1 alone: 12,000)" in message
    assert f"at most {MAX_INTERNAL_PARTITIONS:,} at once: lower the stages' parallelism" in message


def test_the_largest_worker_count_that_fits_is_named_exactly() -> None:
    # Two edges of W x W each, W commit partitions, control and dead letters.
    job = pipeline(None, None, None)
    fits = max(w for w in range(1, 100) if 2 * w * w + w + 2 <= MAX_INTERNAL_PARTITIONS)
    assert sum(plan(job, fits).internal_topics().values()) <= MAX_INTERNAL_PARTITIONS
    with pytest.raises(ConfigurationError, match=f"use --workers {fits} or fewer"):
        plan(job, fits + 1)


def test_more_subtasks_than_key_groups_are_refused_with_one_line() -> None:
    with pytest.raises(ConfigurationError) as caught:
        plan(pipeline(None, None, name="wc", max_parallelism=4), 5)
    assert str(caught.value) == (
        "stage 0 of job wc would run 5 subtasks (--workers 5), more than its max parallelism 4:"
        " lower it, or start the job fresh with a larger Job(max_parallelism=...)"
    )
    with pytest.raises(ConfigurationError, match=r"\(parallelism 9\), more than its max"):
        plan(pipeline(1, 9, max_parallelism=8), 1)
    with pytest.raises(ConfigurationError, match=r"\(Job\(parallelism=9\)\)"):
        plan(pipeline(None, parallelism=9, max_parallelism=8), 1)
    assert plan(pipeline(None, None, max_parallelism=4), 4).parallelism == (4, 4)


@pytest.mark.parametrize("bad", [0, -1, 32_769, 2.0, True])
def test_max_parallelism_must_be_from_1_to_32768(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="max_parallelism must be an int from 1 to 32768"):
        Job("j", max_parallelism=bad)  # type: ignore[arg-type]


# -- started_with ---------------------------------------------------------------


def test_topics_of_the_same_layout_or_of_other_jobs_are_no_problem() -> None:
    job = pipeline(None, None, name="wc")
    assert started_with(job, plan(job, 4).internal_topics(), 4) is None
    assert started_with(job, {"kstream.other.s1": 7, "words": 3}, 4) is None


def test_the_channel_topic_is_named_before_the_others() -> None:
    job = pipeline(None, None, name="wc")
    existing = plan(job, 2).internal_topics()
    problem = started_with(job, existing, 4)
    assert problem is not None
    assert "(kstream.wc.s1 has 4 partitions, 16 with 4 workers)" in problem
    assert "run it again with --workers 2" in problem


def test_a_commit_topic_too_small_alone_still_names_the_worker_count() -> None:
    job = pipeline(2, 2, name="wc")  # fixed parallelism: the channel never changes
    existing = {**plan(job, 1).internal_topics(), "kstream.wc.commits": 1}
    problem = started_with(job, existing, 1)
    assert problem is not None
    assert problem.startswith("job wc was started with another parallelism")
    assert "(kstream.wc.commits has 1 partitions, 2 with the parallelism the job sets now)" in (
        problem
    )


def test_a_commit_topic_larger_than_needed_is_kept() -> None:
    # A job rescaled to fewer sink subtasks keeps the old subtasks' markers.
    job = pipeline(1, 1, name="wc")
    existing = {**plan(job, 1).internal_topics(), "kstream.wc.commits": 5}
    assert started_with(job, existing, 1) is None


def test_a_parallelism_the_job_fixes_is_not_blamed_on_the_worker_count() -> None:
    # Started as Job(parallelism=2), now Job(parallelism=3): --workers has no say in it.
    before = plan(pipeline(None, None, name="wc", parallelism=2), 2).internal_topics()
    problem = started_with(pipeline(None, None, name="wc", parallelism=3), before, 2)
    assert problem == (
        "job wc was started with another parallelism (kstream.wc.s1 has 4 partitions, 9 with "
        "the parallelism the job sets now); run it with the parallelism it was started with, "
        "or start it under a new --job-name; it has no checkpoint with key groups to rescale"
    )


def test_a_layout_no_worker_count_produces_means_the_parallelism_changed() -> None:
    job = pipeline(None, None, name="wc")
    problem = started_with(job, {"kstream.wc.s1": 7}, 2)
    assert problem == (
        "job wc was started with another parallelism (kstream.wc.s1 has 7 partitions, 4 with "
        "2 workers); run it with the parallelism it was started with, or start it under a new "
        "--job-name; it has no checkpoint with key groups to rescale"
    )


def test_one_worker_is_named_in_the_singular() -> None:
    job = pipeline(None, None, name="wc")
    problem = started_with(job, plan(job, 1).internal_topics(), 2)
    assert problem is not None
    assert problem.startswith("job wc was started with 1 worker (")
