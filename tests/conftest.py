"""Shared fixtures: a real Kafka cluster, reached one of three ways.

1. ``KSTREAM_BOOTSTRAP`` set: that cluster.
2. A Docker engine answers: testcontainers' KafkaContainer.
3. Otherwise: kstream's local broker (KRaft, jars from Maven Central) on
   ``KSTREAM_TEST_BROKER_PORT`` (default 23192, apart from the demo's 23092 so
   tests that restart their broker never touch a user's).

Tests never skip for lack of a broker: the project can always start one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from kstream.admin import Admin
from kstream.broker import LocalBroker
from kstream.testing import unique_name

TEST_BROKER_PORT = int(os.environ.get("KSTREAM_TEST_BROKER_PORT", "23192"))


def _docker_available() -> bool:
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        done = subprocess.run([docker, "info"], capture_output=True, timeout=10, check=False)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


@pytest.fixture(scope="session")
def local_broker() -> Iterator[LocalBroker | None]:
    """The local broker the session uses, or None when another cluster serves the tests."""
    if os.environ.get("KSTREAM_BOOTSTRAP") or _docker_available():
        yield None
        return
    broker = LocalBroker(TEST_BROKER_PORT)
    was_running = broker.status().running
    if not was_running:
        # The suite's own broker is disposable: start from empty storage, so that
        # topics of earlier runs do not pile up and slow it down.
        broker.wipe()
    broker.start()
    yield broker
    # Leave a broker somebody else started (another test session, a developer) running.
    if not was_running:
        broker.stop()


@pytest.fixture(scope="session")
def bootstrap(local_broker: LocalBroker | None) -> Iterator[str]:
    """Bootstrap address of a real, running Kafka cluster."""
    env = os.environ.get("KSTREAM_BOOTSTRAP")
    if env:
        Admin(env).check_reachable()
        yield env
    elif local_broker is not None:
        yield local_broker.bootstrap
    else:
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer().with_kraft() as kafka:
            yield kafka.get_bootstrap_server()


@pytest.fixture
def admin(bootstrap: str) -> Admin:
    return Admin(bootstrap)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (not created)."""
    return unique_name(f"t-{request.node.name[:40]}".replace("[", "-").replace("]", ""))
