"""Lineage headers on exactly-once output, across real worker kills, checked by the
audit's lineage definition: every committed input record has exactly one output."""

from __future__ import annotations

from pathlib import Path

import pytest

from kstream.audit.checks import CheckResult, Record, lineage
from kstream.dataflow.job import Job
from kstream.dataflow.outputs import Guarantee
from kstream.errors import ConfigurationError
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import Feeder, read_all, run_until_consumed, unique_name, wait_settled
from kstream.tools.spec import load_job

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

JOB_FILE = """
from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource


def job(params):
    j = Job(params["name"])
    (j.source(KafkaSource(params["input"]))
        .map(str.upper)
        .sink(KafkaSink(params["output"], lineage=True)))
    return j
"""


def _records(bootstrap: str, topic: str) -> list[Record]:
    return [
        Record(r.partition, r.offset, r.key, r.value, r.headers) for r in read_all(bootstrap, topic)
    ]


def _run_with_kills(
    bootstrap: str, tmp_path: Path, guarantee: Guarantee
) -> tuple[CheckResult, list[Record], list[Record]]:
    """The 1:1 job over 30,000 lines with 2 workers and 2 SIGKILLs; the lineage check."""
    admin = Admin(bootstrap)
    src, dst = unique_name("lin-in"), unique_name("lin-out")
    admin.create_topics({src: 3, dst: 2})
    # Fed while the job runs, so that the kills hit work in flight.
    feeder = Feeder(bootstrap, src, [f"line {i}".encode() for i in range(30_000)], 3, 5000.0)
    job_file = tmp_path / "lineage_job.py"
    job_file.write_text(JOB_FILE)
    params = {"input": src, "output": dst, "name": unique_name("lineage")}
    spec = f"{job_file}:job"
    runner = Runner(
        RunConfig(
            JobRef(spec, params),
            bootstrap,
            2,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.3),
            guarantee=guarantee,
        ),
        load_job(spec, params),
        say=lambda _: None,
    )
    runner.prepare()
    kills = run_until_consumed(
        runner,
        src,
        feeder.ends,
        kills=2,
        seed=3,
        say=lambda _: None,
        chaos=lambda _: feeder.feed(),
    )
    assert kills == 2
    assert runner.stats.recoveries >= 2
    wait_settled(bootstrap, dst)  # the last commit's markers are in the log
    inputs, outputs = _records(bootstrap, src), _records(bootstrap, dst)
    return lineage(inputs, outputs, input_topic=src, output_topic=dst), inputs, outputs


def test_exactly_once_every_input_has_exactly_one_output_naming_it(
    bootstrap: str, tmp_path: Path
) -> None:
    result, inputs, outputs = _run_with_kills(bootstrap, tmp_path, "exactly-once")
    assert (result.duplicates, result.lost, result.unexpected) == (0, 0, 0)
    assert len(outputs) == len(inputs) == 30_000
    by_position = {(r.partition, r.offset): r.value for r in inputs}
    for out in outputs:
        h = dict(out.headers)
        source = (int(h["kstream.src.partition"] or b""), int(h["kstream.src.offset"] or b""))
        assert out.value == (by_position[source] or b"").upper()


def test_at_most_once_never_outputs_an_input_twice(bootstrap: str, tmp_path: Path) -> None:
    result, inputs, outputs = _run_with_kills(bootstrap, tmp_path, "at-most-once")
    assert (result.duplicates, result.unexpected) == (0, 0)
    assert len(outputs) == len(inputs) - result.lost


def test_at_least_once_never_loses_an_input(bootstrap: str, tmp_path: Path) -> None:
    result, inputs, outputs = _run_with_kills(bootstrap, tmp_path, "at-least-once")
    assert (result.lost, result.unexpected) == (0, 0)
    assert len(outputs) == len(inputs) + result.duplicates


def test_lineage_behind_a_channel_is_refused_before_anything_runs(
    bootstrap: str, tmp_path: Path
) -> None:
    from kstream.connectors.kafka import KafkaSink, KafkaSource

    admin = Admin(bootstrap)
    src, dst = unique_name("lin-in"), unique_name("lin-out")
    admin.create_topics({src: 1, dst: 1})
    j = Job(unique_name("lineage-keyed"))
    (
        j.source(KafkaSource(src))
        .key_by(lambda line: line)
        .process(lambda k, v, state: [v], name="echo")
        .sink(KafkaSink(dst, lineage=True))
    )
    runner = Runner(
        RunConfig(
            JobRef("unused:job", {}), bootstrap, 1, tmp_path, checkpoints=CoordinatorConfig()
        ),
        j,
    )
    with pytest.raises(ConfigurationError, match="lineage needs the sink in its source's stage"):
        runner.prepare()
