"""A container that exits early fails with its last log lines."""

from __future__ import annotations

import pytest
from kafka_container import kafka_container
from netns import free_port

from kstream.errors import EnvironmentSetupError

pytestmark = pytest.mark.containers


def test_a_broker_container_that_exits_shows_its_last_log_lines() -> None:
    # The kstream image in the broker's place: it prints its usage and exits at once.
    with (
        pytest.raises(EnvironmentSetupError) as caught,
        kafka_container(free_port("127.0.0.1"), image="kstream/kstream:latest"),
    ):
        pytest.fail("the kstream image served as a broker")
    first, *tail = str(caught.value).splitlines()
    assert first.startswith("the Kafka container of kstream/kstream:latest did not start ("), first
    assert first.endswith("its last log lines:"), first
    # The tail is the end of the image's usage: its last command, `demo`.
    assert any("Self-contained demonstrations" in line for line in tail), tail
