"""A record the worker's shared producer cannot deliver must stop the worker (and so
roll the job back), never vanish: channels and plain sinks write through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kstream.errors import RecordLostError
from kstream.examples import wordcount
from kstream.infra.admin import Admin
from kstream.protocol.names import control_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.worker.process import Worker
from kstream.testing import unique_name

pytestmark = pytest.mark.broker


def test_an_undelivered_record_raises(bootstrap: str, tmp_path: Path) -> None:
    topic = unique_name("undelivered")
    params = {"name": unique_name("job")}
    # The coordinator creates the control topic; a worker waits for it.
    Admin(bootstrap).create_topics({topic: 1, control_topic(params["name"]): 1})
    config = RunConfig(JobRef("kstream.examples.wordcount:job", params), bootstrap, 1, tmp_path)
    worker = Worker(config, 0, wordcount.job(params))
    worker.raise_if_undelivered()  # nothing lost yet
    # Queued before the producer knows the topic's metadata, so it fails on delivery.
    worker.producer.produce(topic, b"lost", partition=5)
    assert worker.producer.flush(30) == 0
    with pytest.raises(RecordLostError, match=r"1 records not delivered.*\[5\]"):
        worker.raise_if_undelivered()
