"""A meta.json the runner finds damaged is a damaged checkpoint, never a crash.

The runner validates the checkpoint a rollback restores, then reads its
snapshots' metadata (identity, layout). A meta.json that stops matching its
manifest in between (damage meeting the runner, as a second writer once did)
must come back as a problem, which the coordinator answers by falling back to
the previous checkpoint, not as an exception that stops the runner (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from object_store import Bucket

from kstream.connectors.kafka import KafkaSink, KafkaSource
from kstream.dataflow.identity import identity_of
from kstream.dataflow.job import Job
from kstream.dataflow.plan import plan
from kstream.protocol.coordination import CheckpointDamaged, CoordinatorConfig, History, Recover
from kstream.protocol.coordinator import Coordinator
from kstream.runtime.checkpoint.objects import ObjectCheckpointStorage, s3_client
from kstream.runtime.checkpoint.storage import SnapshotMeta
from kstream.runtime.checkpoint.url import parse_storage_url
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.running import validate

pytestmark = pytest.mark.s3


def wordcount() -> Job:
    j = Job("wc")
    j.source(KafkaSource("a")).key_by(lambda w: w).process(lambda k, v, s: [v]).sink(
        KafkaSink("out")
    )
    return j


class DamagedAfterItsCheck(ObjectCheckpointStorage):
    """The store as it is, but a meta.json is damaged right after the storage's own check."""

    victim = ""

    def validate(self, checkpoint: int, tasks: Any, identity: str = "") -> list[str]:
        problems = super().validate(checkpoint, tasks, identity)
        manifest = self._manifest(checkpoint, self.victim)
        key = self._key(checkpoint, self.victim, f"{manifest.attempt}/meta.json")
        body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        self.client.put_object(Bucket=self.bucket, Key=key, Body=body.replace(b"7", b"8"))
        return problems


def test_a_meta_damaged_under_the_runner_is_a_fallback(bucket: Bucket, tmp_path: Path) -> None:
    layout = plan(wordcount(), 1)
    identity = identity_of(layout)
    url = parse_storage_url(bucket.url())
    writer = ObjectCheckpointStorage(url, "wc", s3_client())
    for n in (5, 7):
        for task in layout.tasks:
            meta = SnapshotMeta(
                checkpoint=n, generation=2, task=task.id, identity=identity.fingerprint
            )
            writer.store(meta, None)
    config = RunConfig(JobRef("m:wc"), "127.0.0.1:1", 1, tmp_path, checkpoint_storage=bucket.url())
    storage = DamagedAfterItsCheck(url, "wc", s3_client())
    storage.victim = layout.tasks[-1].id

    problems = validate(storage, layout, identity, config, 7)

    [problem] = problems
    assert "does not match its checksum" in problem
    assert "\n" not in problem
    # What the runner does with it: the coordinator falls back to checkpoint 5.
    c = Coordinator(
        frozenset(t.id for t in layout.tasks),
        CoordinatorConfig(),
        History(2, 7, (5, 7)),
    )
    c.start(0.0)
    [fallback] = c.handle(CheckpointDamaged(7, problem, 1.0))
    assert isinstance(fallback, Recover)
    assert fallback.checkpoint == 5
