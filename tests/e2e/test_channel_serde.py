"""A job whose stream records are user objects: refused at the channel with one clear line
naming the type and the ways out, unless the job declares the type or opts in to pickle.

Real `kstream run` processes on a real broker.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from test_cli_run import wait_for, worker_processes
from test_job_safety import Job, caught_up, lines, stop, truth

from kstream.infra.admin import Admin
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: The word count with each word a `Word` object across the channel; ``-p channel=``
#: picks the channel serde ("declared" declares `Word` as a `RecordType`).
OBJECTS_JOB = """
from dataclasses import dataclass

from kstream import Job, KafkaSink, KafkaSource, RecordType


@dataclass(frozen=True)
class Word:
    text: str


def count(key, word, state):
    n = state.get(0) + 1
    state.set(n)
    yield word.text, n


def job(params):
    channel = params.get("channel", "msgpack")
    if channel == "declared":
        channel = [RecordType(Word, lambda w: w.text, Word, tag="word")]
    j = Job("objects-test", on_error="fail", channel_serde=channel)
    (j.source(KafkaSource(params["input"]))
        .flat_map(lambda line: [Word(w) for w in line.split()])
        .key_by(lambda w: w.text)
        .process(count, name="count")
        .sink(KafkaSink(params["output"])))
    return j
"""


def _setup(bootstrap: str, tmp_path: Path) -> tuple[Job, str, str, list[str]]:
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = lines(500)
    produce(bootstrap, src, [(None, line.encode()) for line in text])
    job = Job(bootstrap, tmp_path)
    job.file.write_text(OBJECTS_JOB)
    return job, src, dst, text


def test_user_objects_on_a_channel_fail_the_job_with_the_type_and_the_ways_out(
    bootstrap: str, tmp_path: Path
) -> None:
    job, src, dst, _ = _setup(bootstrap, tmp_path)
    proc = job.run(src, dst)
    try:
        _, stderr = proc.communicate(timeout=180)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 1, stderr  # the job failed (on_error="fail")
    failed = [line for line in stderr.splitlines() if line.startswith("kstream: failed:")]
    assert len(failed) == 1, stderr
    message = failed[0]
    assert "UnsupportedTypeError" in message
    assert "a stream record is a kstream_job_wc.Word, which channels do not carry safely" in message
    assert "channel_serde=[kstream.RecordType(" in message
    assert "channel_serde='trusted-pickle') (unsafe: loading pickle runs code)" in message
    assert "Traceback" not in stderr
    assert worker_processes(job.name) == []
    assert read_all(bootstrap, dst) == []


@pytest.mark.parametrize("channel", ["trusted-pickle", "declared"])
def test_user_objects_cross_when_pickle_is_trusted_or_the_type_declared(
    bootstrap: str, tmp_path: Path, channel: str
) -> None:
    job, src, dst, text = _setup(bootstrap, tmp_path)
    proc = job.run(src, dst, "-p", f"channel={channel}")
    expected: Counter[str] = truth(text)
    try:
        wait_for(lambda: caught_up(bootstrap, dst, expected), 180, "every word's count")
    finally:
        stop(proc)
    assert worker_processes(job.name) == []
