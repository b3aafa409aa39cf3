"""A job whose stream records are user objects: refused at the channel with one clear line
naming the type and the ways out, unless the job declares the type or opts in to pickle.

Real `kstream run` processes on a real broker.
"""

from __future__ import annotations

import os
import pickle
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_cli_run import job_processes, wait_for
from test_job_safety import Job, caught_up, lines, stop, truth

from kstream.infra.admin import Admin
from kstream.protocol.names import ERROR_HEADER, channel_topic, dead_letter_topic
from kstream.runtime.control import read_history
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
    assert job_processes(job.name) == []
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
    assert job_processes(job.name) == []


def test_crafted_channel_records_are_dead_lettered_unread_and_the_job_goes_on(
    bootstrap: str, tmp_path: Path
) -> None:
    # The plain word count (dead-letter policy), safe channels by default.
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = lines(1000)
    produce(bootstrap, src, [(None, line.encode()) for line in text])
    job = Job(bootstrap, tmp_path)
    target = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> tuple[Any, ...]:
            return (os.system, (f"touch {target}",))

    proc = job.run(src, dst)
    try:
        wait_for(lambda: caught_up(bootstrap, dst, truth(text)), 180, "every word's count")
        # Written as the running generation's, so that the reader decodes them.
        generation = max(int(m["generation"]) for m in read_history(bootstrap, job.name)
                         if isinstance(m.get("generation"), int))  # fmt: skip
        header = bytes([0]) + generation.to_bytes(4, "big")
        crafted = [
            header + bytes([3]) + pickle.dumps([("w0", Exploit())]),  # pickle, untrusted
            header + pickle.dumps([("w0", Exploit())]),  # the format before formats existed
            header + bytes([2]) + b"\xc1 not msgpack",
            b"\x00\x01",  # shorter than a header
        ]
        produce(bootstrap, channel_topic(job.name, 1), [(None, v) for v in crafted], partition=0)
        wait_for(
            lambda: len(read_all(bootstrap, dead_letter_topic(job.name))) == len(crafted),
            120,
            "the crafted records in the dead-letter topic",
        )
        more = lines(300, salt=3)
        produce(bootstrap, src, [(None, line.encode()) for line in more])
        wait_for(lambda: caught_up(bootstrap, dst, truth(text + more)), 180, "the counts after")
    finally:
        stop(proc)
    assert not target.exists(), "a crafted pickle ran in a worker"
    dead = read_all(bootstrap, dead_letter_topic(job.name))
    assert sorted(r.value or b"" for r in dead) == sorted(crafted)  # kept whole
    errors = sorted(dict(r.headers)[ERROR_HEADER].decode() for r in dead)
    assert errors[0].startswith("DecodeError: channel batch in format trusted-pickle refused")
    assert errors[1].startswith("DecodeError: channel batch in unknown format 128 refused")
    assert errors[2].startswith("DecodeError: channel record of 2 bytes has no header")
    assert errors[3].startswith("DecodeError: not a kstream-encoded batch")
