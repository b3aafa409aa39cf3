"""The broker-free harness and a real run give the same output for the same input.

The word count runs once through `kstream.testing.run_job` and once on the
cluster (real worker processes, channels, transactions); each word's outputs
must be the same values in the same order, and neither run dead-letters."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kstream.examples import wordcount
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import dead_letter_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import (
    Record,
    produce,
    read_all,
    run_job,
    run_until_consumed,
    unique_name,
    wait_settled,
)

pytestmark = pytest.mark.broker

WORDS = ["exactly", "once", "stream", "state", "barrier", "naïve", "42"]


def by_key(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Each key's values in order: the order a job keeps (one key, one partition)."""
    out: dict[str, list[str]] = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def test_the_word_count_gives_the_same_output_in_the_harness_and_on_kafka(
    bootstrap: str, tmp_path: Path
) -> None:
    rnd = random.Random(8)
    lines = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randrange(1, 5))) for _ in range(60)]
    run = unique_name("harness-vs-run")
    params = {"input": f"{run}-in", "output": f"{run}-out", "name": f"hr-{run}"}
    Admin(bootstrap).create_topics({params["input"]: 1, params["output"]: 2})
    produce(bootstrap, params["input"], [(None, line.encode()) for line in lines])

    harness = run_job(wordcount.job, {params["input"]: [Record(s) for s in lines]}, params)

    runner = Runner(
        RunConfig(
            JobRef("kstream.examples.wordcount:job", params),
            bootstrap,
            1,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
        ),
        wordcount.job(params),
        say=lambda _: None,
    )
    runner.prepare()
    run_until_consumed(runner, params["input"], {0: len(lines)}, say=lambda _: None, timeout=240)
    wait_settled(bootstrap, params["output"])
    on_kafka = [
        ((r.key or b"").decode(), (r.value or b"").decode())
        for r in read_all(bootstrap, params["output"])
    ]

    in_harness = [(r.key, r.value) for r in harness[params["output"]]]
    assert len(in_harness) == sum(len(line.split()) for line in lines)
    assert by_key(on_kafka) == by_key(in_harness)
    assert harness[dead_letter_topic(params["name"])] == []
    assert read_all(bootstrap, dead_letter_topic(params["name"])) == []
