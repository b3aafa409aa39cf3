"""Start-up checks against a real broker: missing output topics, refused or created."""

from __future__ import annotations

import pytest

from kstream.dataflow.plan import plan
from kstream.errors import ConfigurationError
from kstream.examples.wordcount import job
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.runner.preflight import check_cluster
from kstream.testing import unique_name

pytestmark = pytest.mark.broker


def test_a_missing_output_topic_refuses_the_run_and_names_the_option(
    bootstrap: str, admin: Admin
) -> None:
    src, dst = unique_name("pre-in"), unique_name("pre-out")
    admin.create_topics({src: 3})
    p = plan(job({"input": src, "output": dst}), 2)
    with pytest.raises(
        ConfigurationError, match=f"output topic '{dst}' does not exist.*--create-topics"
    ):
        check_cluster(
            p, bootstrap=bootstrap, guarantee="at-least-once", config=CoordinatorConfig(),
            transaction_timeout_s=None,
        )  # fmt: skip
    assert admin.partitions(dst) is None


def test_create_topics_makes_the_output_like_the_input(bootstrap: str, admin: Admin) -> None:
    src, dst = unique_name("pre-in"), unique_name("pre-out")
    admin.create_topics({src: 3})
    p = plan(job({"input": src, "output": dst}), 2)
    said: list[str] = []
    for _ in range(2):  # the second run finds the topic and creates nothing
        check_cluster(
            p, bootstrap=bootstrap, guarantee="exactly-once", config=CoordinatorConfig(),
            transaction_timeout_s=None, create_topics=True, say=said.append,
        )  # fmt: skip
    assert admin.partitions(dst) == 3
    assert admin.replication(dst) == admin.replication(src) == 1
    assert said == [f"created output topic {dst} (3 partitions, replication 1, like input {src})"]


def test_a_sink_writing_a_topic_the_job_reads_is_refused_unless_allowed(
    bootstrap: str, admin: Admin
) -> None:
    src = unique_name("pre-loop")
    admin.create_topics({src: 2})
    looped = job({"input": src, "output": src})
    check = {
        "bootstrap": bootstrap, "guarantee": "at-least-once", "config": CoordinatorConfig(),
        "transaction_timeout_s": None,
    }  # fmt: skip
    with pytest.raises(ConfigurationError, match=f"writes topic {src}, which the job reads"):
        check_cluster(plan(looped, 2), **check)  # type: ignore[arg-type]
    looped.allow_feedback = True
    check_cluster(plan(looped, 2), **check)  # type: ignore[arg-type]
