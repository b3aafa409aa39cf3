"""Lineage headers on exactly-once output, across real worker kills, checked by the
audit's lineage definition: every committed input record has exactly one output."""

from __future__ import annotations

from pathlib import Path

import pytest

from kstream.admin import Admin
from kstream.audit.checks import Record, lineage
from kstream.coordinator import CoordinatorConfig
from kstream.errors import ConfigurationError
from kstream.job import Job
from kstream.runner import Runner
from kstream.spec import load_job
from kstream.testing import produce, read_all, run_until_consumed, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

JOB_FILE = """
from kstream.job import Job
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


def test_every_input_has_exactly_one_output_naming_it(bootstrap: str, tmp_path: Path) -> None:
    admin = Admin(bootstrap)
    src, dst = unique_name("lin-in"), unique_name("lin-out")
    admin.create_topics({src: 3, dst: 2})
    produce(bootstrap, src, [(None, f"line {i}".encode()) for i in range(30_000)])
    ends = {p: high for p, (_, high) in admin.watermarks(src).items()}
    job_file = tmp_path / "lineage_job.py"
    job_file.write_text(JOB_FILE)
    params = {"input": src, "output": dst, "name": unique_name("lineage")}
    spec = f"{job_file}:job"
    runner = Runner(
        load_job(spec, params),
        spec=spec,
        params=params,
        bootstrap=bootstrap,
        workers=2,
        state_dir=tmp_path / "state",
        config=CoordinatorConfig(interval=0.3),
        say=lambda _: None,
    )
    runner.prepare()
    kills = run_until_consumed(runner, src, ends, kills=2, seed=3, say=lambda _: None)
    assert kills == 2
    assert runner.stats.recoveries >= 2

    inputs, outputs = _records(bootstrap, src), _records(bootstrap, dst)
    result = lineage(inputs, outputs, input_topic=src, output_topic=dst)
    assert (result.duplicates, result.lost, result.unexpected) == (0, 0, 0)
    assert len(outputs) == len(inputs) == 30_000
    by_position = {(r.partition, r.offset): r.value for r in inputs}
    for out in outputs:
        h = dict(out.headers)
        source = (int(h["kstream.src.partition"] or b""), int(h["kstream.src.offset"] or b""))
        assert out.value == (by_position[source] or b"").upper()


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
        j,
        spec="unused:job",
        params={},
        bootstrap=bootstrap,
        workers=1,
        state_dir=tmp_path,
        config=CoordinatorConfig(),
    )
    with pytest.raises(ConfigurationError, match="lineage needs the sink in its source's stage"):
        runner.prepare()
