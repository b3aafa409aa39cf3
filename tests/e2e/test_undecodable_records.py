"""Records a source cannot decode are dead letters with the reason; the rest is counted."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest
from test_cli_run import kstream, wait_for

from kstream.infra.admin import Admin
from kstream.protocol.names import ERROR_HEADER, dead_letter_topic
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

JSON_JOB = """
from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource


def count(word, _, state):
    n = state.get(0) + 1
    state.set(n)
    yield word, n


def job(params):
    j = Job("json-words")
    (j.source(KafkaSource(params["input"], value_serde="json"))
        .map(lambda event: event["word"])
        .key_by(lambda w: w)
        .process(count, name="count")
        .sink(KafkaSink(params["output"])))
    return j
"""


def test_undecodable_and_unusable_records_are_dead_letters_with_their_reason(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("undecodable")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "jsonjob.py").write_text(JSON_JOB)
    good = [f'{{"word": "w{i % 9}"}}'.encode() for i in range(2000)]
    bad = {
        b'{"word": "unterminated': "DecodeError: not JSON",
        b"\xff\xfe not utf-8": "DecodeError: not JSON",
        b"[" * 100_000: "RecursionError",  # nesting deeper than the decoder recurses
        b'{"other": 1}': "KeyError: 'word'",  # decodes, but the job's function fails
    }
    values = good[:1000] + list(bad) + good[1000:]
    produce(bootstrap, src, [(None, v) for v in values])
    proc = kstream(
        "run", "jsonjob.py:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        cwd=tmp_path,
    )  # fmt: skip
    truth = Counter(f"w{i % 9}" for i in range(2000))
    try:

        def caught_up() -> bool:
            best: dict[str, int] = {}
            for r in read_all(bootstrap, dst):
                word = (r.key or b"").decode()
                best[word] = max(best.get(word, 0), int(r.value or b"0"))
            return best == dict(truth)

        wait_for(caught_up, 120, "every good record counted")
        wait_for(
            lambda: len(read_all(bootstrap, dead_letter_topic(name))) == len(bad),
            60,
            "a dead letter per bad record",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    letters = read_all(bootstrap, dead_letter_topic(name))
    # Each bad record is its own dead letter, byte for byte, with its own reason.
    reasons = {r.value: dict(r.headers)[ERROR_HEADER].decode() for r in letters}
    assert set(reasons) == set(bad)
    for value, reason in bad.items():
        assert reasons[value].startswith(reason), (value[:20], reasons[value])
    assert "dead letter" in stderr
