"""A source subtask that reads a trigger takes its snapshot after the batch it
fetched already (real broker): records that were there when the trigger was read
belong to that checkpoint, rather than waiting an interval for the next one."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kstream.connectors.kafka import KafkaSource
from kstream.dataflow.job import Job
from kstream.dataflow.plan import TaskSpec, plan
from kstream.infra.admin import Admin
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage
from kstream.runtime.worker.context import BATCH, TaskContext
from kstream.runtime.worker.process import open_task
from kstream.runtime.worker.source_task import SourceTask
from kstream.testing import RecordingSink, unique_name
from tests.ports import DetachedPorts

pytestmark = pytest.mark.broker

READ_TIMEOUT_S = 60.0


def test_a_triggered_source_snapshots_after_the_batch_it_had_fetched(
    bootstrap: str, tmp_path: Path
) -> None:
    sink = RecordingSink()
    source = KafkaSource(unique_name("trigger-batch-in"))
    job = Job(unique_name("trigger-batch"))
    job.source(source).sink(sink)
    p = plan(job, 1)
    Admin(bootstrap).create_topics({source.topic: 1, **p.internal_topics()})
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    # Two batches' worth in one partition: a fetch brings more than one batch,
    # so after the first batch is read the second is already fetched.
    for i in range(2 * BATCH):
        producer.produce(source.topic, str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    with ThreadPoolExecutor(1) as executor:
        rt = TaskContext(
            bootstrap=bootstrap,
            plan=p,
            generation=1,
            producer=producer,
            storage=LocalCheckpointStorage(tmp_path / "checkpoints"),
            state_root=tmp_path / "state",
            executor=executor,
            ports=DetachedPorts(),
        )
        task = open_task(rt, TaskSpec(0, 0, 1), None)
        assert isinstance(task, SourceTask)
        try:
            deadline = time.monotonic() + READ_TIMEOUT_S
            while not sink.writes:
                assert time.monotonic() < deadline, "the source read nothing"
                task.poll(0.5)
            read_before = len(sink.writes)
            assert read_before < 2 * BATCH
            task.trigger(1)
            read = task.poll(0.5)
            assert len(task.pending) == 1
            offsets = task.pending[0].meta.source_offsets[source.topic]
            # The batch this poll read, fetched before the trigger was served, is
            # in checkpoint 1: its offsets are where the subtask stands after it.
            assert read > 0
            assert offsets == {0: read_before + read} == dict(task.positions)
            task.pending[0].future.result(timeout=60)
        finally:
            task.close()
    producer.flush(30)
