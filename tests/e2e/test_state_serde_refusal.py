"""`kstream run` refuses to restore state written by another state serde, with one line,
before any worker starts; the job's own serde resumes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_run import job_processes, wait_for, worker_processes
from test_job_safety import Job, lines, refused, run_until_checkpointed, stop, truth

from kstream.infra.admin import Admin
from kstream.testing import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: The word count with its state serde chosen by ``-p serde=``.
SERDE_JOB = """
from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource


def job(params):
    j = Job("serde-test", state_serde=params.get("serde", "msgpack"))
    (j.source(KafkaSource(params["input"]))
        .flat_map(str.split)
        .key_by(lambda w: w)
        .count()
        .sink(KafkaSink(params["output"])))
    return j
"""


def test_a_restore_with_another_state_serde_is_refused_naming_both(
    bootstrap: str, tmp_path: Path
) -> None:
    from kstream.testing import produce

    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = lines(1000)
    produce(bootstrap, src, [(None, line.encode()) for line in text])
    job = Job(bootstrap, tmp_path)
    job.file.write_text(SERDE_JOB)
    newest = run_until_checkpointed(job, src, dst, text)
    assert truth(text)  # the run above checked every count

    message = refused(job.run(src, dst, "-p", "serde=json"), "restoring msgpack state as JSON")
    assert f"checkpoint {newest} of s1-" in message
    assert "written with the msgpack state serde; the job's is json" in message
    assert job_processes(job.name) == []

    resumed = job.run(src, dst, "-p", "serde=msgpack")
    wait_for(lambda: len(worker_processes(job.name)) == 2, 90, "the resumed job's workers")
    assert "resuming from checkpoint" in stop(resumed)
