"""Shared fixtures: a real Kafka cluster, reached one of three ways.

1. ``KSTREAM_BOOTSTRAP`` set: that cluster.
2. ``KSTREAM_TEST_KAFKA=docker``, or ``auto`` (the default) and a Docker engine
   answers: a container of the locally built broker image (`kafka_container`;
   ``deploy/docker/build-images.sh`` builds it) on ``KSTREAM_TEST_BROKER_PORT``.
3. ``KSTREAM_TEST_KAFKA=local``, or ``auto`` and no Docker engine: kstream's local
   broker (KRaft, jars from Maven Central) on ``KSTREAM_TEST_BROKER_PORT``
   (default 23192, apart from the demo's 23092 so tests that restart their
   broker never touch a user's).

Only the local broker is the suite's to kill: tests that restart their broker
skip under the other two. Tests never skip for lack of a broker: the project can
always start one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Literal

import pytest
from hypothesis import settings
from netns import HostNet, NetnsUnavailableError, free_port

from kstream.errors import EnvironmentSetupError
from kstream.infra.admin import Admin
from kstream.infra.broker import LocalBroker
from kstream.testing import unique_name

#: The object store's fixtures (`object_store`, `bucket`): S3Proxy, started when used;
#: the Spark cluster's (`spark_cluster`): a master and two workers, started when used.
pytest_plugins = ["object_store", "spark_cluster"]

# Property tests judge answers, never speed: on a loaded 2-core machine an example
# can take longer than hypothesis's default 200 ms deadline and fail for that alone.
settings.register_profile("kstream", deadline=None)
settings.load_profile("kstream")

TEST_BROKER_PORT = int(os.environ.get("KSTREAM_TEST_BROKER_PORT", "23192"))
#: Where the suite's Kafka comes from when ``KSTREAM_BOOTSTRAP`` is unset.
KAFKA_CHOICES = ("auto", "docker", "local")

KafkaSource = Literal["bootstrap", "docker", "local"]


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
def kafka_source() -> KafkaSource:
    """Which of the three ways serves this session (decided once)."""
    if os.environ.get("KSTREAM_BOOTSTRAP"):
        return "bootstrap"
    choice = os.environ.get("KSTREAM_TEST_KAFKA", "auto")
    if choice == "docker":
        return "docker"
    if choice == "local":
        return "local"
    if choice != "auto":
        pytest.exit(
            f"KSTREAM_TEST_KAFKA must be one of {', '.join(KAFKA_CHOICES)}, got {choice!r}",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )
    return "docker" if _docker_available() else "local"


@pytest.fixture(scope="session")
def local_broker(kafka_source: KafkaSource) -> Iterator[LocalBroker | None]:
    """The local broker the session uses, or None when another cluster serves the tests."""
    if kafka_source != "local":
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
def bootstrap(kafka_source: KafkaSource, local_broker: LocalBroker | None) -> Iterator[str]:
    """Bootstrap address of a real, running Kafka cluster."""
    if kafka_source == "bootstrap":
        env = os.environ["KSTREAM_BOOTSTRAP"]
        Admin(env).check_reachable()
        yield env
    elif local_broker is not None:
        yield local_broker.bootstrap
    else:
        # Imported only here: the other ways must not need Docker's client libraries.
        from kafka_container import kafka_container

        with ExitStack() as stack:
            try:
                docker_bootstrap = stack.enter_context(kafka_container(TEST_BROKER_PORT))
            except EnvironmentSetupError as exc:
                # Every broker test would fail the same way: stop the session with the one line.
                pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
            yield docker_bootstrap


@pytest.fixture
def admin(bootstrap: str) -> Admin:
    return Admin(bootstrap)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (not created)."""
    return unique_name(f"t-{request.node.name[:40]}".replace("[", "-").replace("]", ""))


@pytest.fixture(autouse=True)
def _client_settings_stay_in_their_test() -> Iterator[None]:
    """`use_settings` (and so `--kafka-config` run in-process) sets an environment
    variable every later client would read: restore it after each test."""
    from kstream.infra.client_settings import ENV_VAR

    before = os.environ.get(ENV_VAR)
    yield
    if before is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = before


@pytest.fixture(scope="module")
def module_host_net() -> Iterator[HostNet]:
    """A bridge of this module's own for network-namespace hosts (`netns`); add hosts
    with ``add_host()``. Skips, with the reason, where namespaces cannot be made (not
    root, no iproute2). Everything it made is removed afterwards."""
    try:
        net = HostNet.create()
    except NetnsUnavailableError as exc:
        pytest.skip(str(exc))
    try:
        yield net
    finally:
        net.close()


@pytest.fixture
def host_net(module_host_net: HostNet) -> Iterator[HostNet]:
    """`module_host_net` for one test: afterwards every host's processes are killed
    and every link healed, whatever the test did (or failed to undo)."""
    yield module_host_net
    module_host_net.reset()


@pytest.fixture(scope="module")
def bridge_broker(module_host_net: HostNet) -> Iterator[LocalBroker]:
    """A Kafka broker of this module's own, listening on (and advertising) the bridge
    address of `module_host_net`, so processes in its hosts reach it; removed afterwards.
    Shared by the module's tests (a start costs ~15 s): each uses its own topics."""
    host_net = module_host_net
    broker = LocalBroker(free_port(host_net.address), host=host_net.address)
    broker.wipe()
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
        broker.wipe()
