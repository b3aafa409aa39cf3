"""Records too large for Kafka, in real worker processes: each is a dead letter that
keeps the record itself and a reason; every other record is output exactly once and
no innocent record is blamed."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer

from kstream.dataflow.job import Job
from kstream.examples import wordcount
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.limits import MAX_MESSAGE_BYTES
from kstream.protocol.names import SHA256_HEADER, TRUNCATED_HEADER, dead_letter_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import ReadRecord, read_all, run_until_consumed, unique_name, wait_settled
from kstream.tools.demo import check_running_counts

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: Input topics here take records of up to 8 MB, so a 2 MB line can be fed.
BIG_INPUT_BYTES = 8_000_000
#: The 1:1 job's output topic takes records of at most 20 kB.
SMALL_OUTPUT_BYTES = 20_000
JOB_FILE = Path(__file__).with_name("large_output_job.py")


def feed(bootstrap: str, topic: str, lines: list[str]) -> dict[int, int]:
    """Write `lines` to partition 0 of `topic`; return its end offset."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "message.max.bytes": BIG_INPUT_BYTES, "log_level": 0}
    )
    for line in lines:
        producer.produce(topic, line.encode(), partition=0)
    assert producer.flush(60) == 0
    return {0: len(lines)}


def run(
    bootstrap: str,
    job: Job,
    spec: str,
    params: dict[str, str],
    src: str,
    ends: dict[int, int],
    state: Path,
) -> None:
    runner = Runner(
        RunConfig(
            JobRef(spec, params),
            bootstrap,
            2,
            state,
            checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
        ),
        job,
        say=lambda _: None,
    )
    runner.prepare()
    run_until_consumed(runner, src, ends, timeout=300)


def headers(r: ReadRecord) -> dict[str, bytes]:
    return dict(r.headers)


def test_a_token_too_large_for_a_channel_is_one_marked_dead_letter(
    bootstrap: str, tmp_path: Path
) -> None:
    run_id = unique_name("huge-token")
    src, dst = f"{run_id}-lines", f"{run_id}-counts"
    admin = Admin(bootstrap)
    admin.create_topics({src: 1}, {MAX_MESSAGE_BYTES: str(BIG_INPUT_BYTES)})
    admin.create_topics({dst: 2})
    huge = "H" * 2_000_000
    lines = [f"the quick w{i % 50} fox" for i in range(2_000)]
    lines[700] = f"the {huge} fox"
    ends = feed(bootstrap, src, lines)
    params = {"input": src, "output": dst, "name": f"wc-{run_id}"}
    run(
        bootstrap,
        wordcount.job(params),
        "kstream.examples.wordcount:job",
        params,
        src,
        ends,
        tmp_path,
    )
    wait_settled(bootstrap, dst)
    # Every word but the huge one, exactly once; the huge one is the only dead letter.
    expected = [line.replace(huge, "") for line in lines]
    check = check_running_counts(expected, read_all(bootstrap, dst))
    assert (check.missing, check.duplicates, check.out_of_order) == (0, 0, 0)
    assert check.wrong_final == []
    [letter] = read_all(bootstrap, dead_letter_topic(params["name"]))
    h = headers(letter)
    assert b"RecordTooLargeError" in h["kstream.error"]
    assert f"kstream.wc-{run_id}.s1".encode() in h["kstream.error"]
    assert "kstream.src.offset" not in h  # unknown, so nobody is blamed
    value = letter.value or b""
    assert value.startswith(b"('" + b"H" * 1000)  # the stream record itself: (key, value)
    assert int(h[TRUNCATED_HEADER]) > 4_000_000  # repr of the (word, word) pair, cut to fit
    assert len(h[SHA256_HEADER]) == 64


def test_an_output_too_large_for_its_topic_is_a_dead_letter_naming_its_input(
    bootstrap: str, tmp_path: Path
) -> None:
    from large_output_job import grow, job

    run_id = unique_name("big-out")
    src, dst = f"{run_id}-in", f"{run_id}-out"
    admin = Admin(bootstrap)
    admin.create_topics({src: 1})
    admin.create_topics({dst: 1}, {MAX_MESSAGE_BYTES: str(SMALL_OUTPUT_BYTES)})
    lines = [f"line {i}" for i in range(3_000)]
    big = {100, 1_500, 2_999}
    for i in big:
        lines[i] = f"big {i}"
    ends = feed(bootstrap, src, lines)
    params = {"input": src, "output": dst, "name": f"one-{run_id}"}
    run(bootstrap, job(params), f"{JOB_FILE}:job", params, src, ends, tmp_path)
    wait_settled(bootstrap, dst)
    out = read_all(bootstrap, dst)
    assert sorted(int(headers(r)["kstream.src.offset"]) for r in out) == [
        i for i in range(len(lines)) if i not in big
    ]
    assert all((r.value or b"").startswith(b"line ") for r in out)
    letters = read_all(bootstrap, dead_letter_topic(params["name"]))
    assert sorted(int(headers(r)["kstream.src.offset"]) for r in letters) == sorted(big)
    for r in letters:
        i = int(headers(r)["kstream.src.offset"])
        assert r.value == grow(f"big {i}").encode()  # the output itself, whole
        assert b"cannot be written to " + dst.encode() in headers(r)["kstream.error"]
