"""Values the default `str` Kafka sink has no text form for are dead letters, never reprs."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from test_cli_run import kstream, wait_for

from kstream.infra.admin import Admin
from kstream.protocol.names import ERROR_HEADER, dead_letter_topic
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

SHAPES_JOB = """
from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource


def shape(line):
    kind, _, word = line.partition(" ")
    if kind == "dict":
        return {"word": word}
    if kind == "tuple":
        return (word, 1, 2)
    if kind == "set":
        return {word}
    if kind == "number":
        return len(word)
    return word


def job(params):
    j = Job("shapes")
    j.source(KafkaSource(params["input"])).map(shape).sink(KafkaSink(params["output"]))
    return j
"""


def test_dicts_tuples_and_sets_are_dead_letters_naming_the_serde(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("shapes")
    Admin(bootstrap).create_topics({src: 1, dst: 1})
    (tmp_path / "shapes.py").write_text(SHAPES_JOB)
    lines = ["text alpha", "dict beta", "number gamma", "tuple delta", "set eps", "text zeta"]
    produce(bootstrap, src, [(None, line.encode()) for line in lines])
    proc = kstream(
        "run", "shapes.py:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "1", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_for(lambda: len(read_all(bootstrap, dst)) >= 3, 120, "the text outputs")
        wait_for(
            lambda: len(read_all(bootstrap, dead_letter_topic(name))) >= 3,
            60,
            "a dead letter per value without text form",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    # Only values with a text form reach the output; no Python repr is ever written.
    assert [r.value for r in read_all(bootstrap, dst)] == [b"alpha", b"5", b"zeta"]
    reasons = sorted(
        dict(r.headers)[ERROR_HEADER].decode() for r in read_all(bootstrap, dead_letter_topic(name))
    )
    assert len(reasons) == 3, reasons
    for reason, kind in zip(reasons, ("dict", "set", "tuple"), strict=True):
        assert f"the str serde cannot write a value of type {kind} as text" in reason, reason
    assert 'value_serde="json"' in reasons[0]
    assert 'value_serde="json"' in reasons[2]
