"""The test suite's Kafka in Docker: a container of the locally built broker image.

The conftest uses this when a Docker engine answers and ``KSTREAM_BOOTSTRAP`` is
unset. No image registry is needed: the image ``kstream/kafka:<version>`` is built
on this machine by `BUILD_COMMAND` from the same jars and configs as the local
broker. The container shares the host's network, so the broker's advertised
address 127.0.0.1:<port> is the one clients reach, exactly as with the local broker.

Only testcontainers' generic, non-deprecated API is used (`DockerContainer` with a
log wait strategy): the suite turns every warning into an error.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from docker.errors import DockerException, ImageNotFound
from testcontainers.core.config import testcontainers_config
from testcontainers.core.container import DockerContainer
from testcontainers.core.wait_strategies import LogMessageWaitStrategy

from kstream.errors import EnvironmentSetupError, PortInUseError
from kstream.infra.broker import KAFKA_VERSION

__all__ = ["BUILD_COMMAND", "IMAGE", "LABEL", "kafka_container", "label_value", "log_tail"]

#: Tagged with the Kafka release so the image always matches the local broker's jars.
IMAGE = f"kstream/kafka:{KAFKA_VERSION}"
#: The one command that builds `IMAGE` (idempotent; a minute the first time).
BUILD_COMMAND = "deploy/docker/build-images.sh"
#: Every container, network and volume the suite starts carries this label (value:
#: ``KSTREAM_TEST_DOCKER_LABEL``, default ``tests``), so leftovers can be found and removed.
LABEL = "org.kstream.test"
#: Log lines of a container that exited early shown in the failure.
LOG_TAIL_LINES = 30
#: The line Kafka logs once its broker and controller listeners accept requests.
READY_LINE = r"Kafka Server started"
#: A cold JVM on a busy machine needs tens of seconds to format storage and start.
READY_TIMEOUT_S = 120


def _port_is_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def label_value() -> str:
    """The value of `LABEL` this test session puts on what it starts."""
    return os.environ.get("KSTREAM_TEST_DOCKER_LABEL", "tests")


def log_tail(container: DockerContainer, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of `container`'s output (both streams), or why there are none."""
    try:
        out, err = container.get_logs()
    except Exception as exc:  # the container may never have been created
        return f"(no logs: {type(exc).__name__}: {exc})"
    text = (out + err).decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


@contextmanager
def kafka_container(port: int, image: str = IMAGE) -> Iterator[str]:
    """Run the broker `image` on 127.0.0.1:`port` (controller on port+1); yield its bootstrap.

    The container starts from empty storage and is removed on exit. Raises, each
    in one line and before any container starts, `PortInUseError` when a port is
    taken and `EnvironmentSetupError` when no Docker engine answers or the image
    is missing (naming `BUILD_COMMAND`). A container that exits or never logs
    `READY_LINE` fails with `EnvironmentSetupError` carrying its last log lines.
    """
    for p in (port, port + 1):
        if _port_is_open(p):
            raise PortInUseError(
                f"port {p} on 127.0.0.1 is in use; the Kafka container needs it "
                "(choose another with KSTREAM_TEST_BROKER_PORT)"
            )
    # Ryuk, testcontainers' reaper of leaked containers, is an image from a
    # registry; the context manager below removes the container itself.
    if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
        testcontainers_config.ryuk_disabled = True
    try:
        container = (
            DockerContainer(image)
            .with_env("KAFKA_PORT", str(port))
            .with_kwargs(network_mode="host", labels={LABEL: label_value()})
            .waiting_for(LogMessageWaitStrategy(READY_LINE).with_startup_timeout(READY_TIMEOUT_S))
        )
        # Checked first: testcontainers would try to pull a missing image from a registry.
        container.get_docker_client().client.images.get(image)
    except ImageNotFound:
        raise EnvironmentSetupError(
            f"the Docker image {image} is missing: build it with `{BUILD_COMMAND}` "
            "(or set KSTREAM_TEST_KAFKA=local to test against kstream's local broker)"
        ) from None
    except DockerException as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise EnvironmentSetupError(
            f"no Docker engine answers ({reason}); start one "
            "or set KSTREAM_TEST_KAFKA=local to test against kstream's local broker"
        ) from None
    try:
        container.start()
    except Exception as exc:
        tail = log_tail(container)
        container.stop()
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise EnvironmentSetupError(
            f"the Kafka container of {image} did not start ({reason}); its last log lines:\n{tail}"
        ) from None
    try:
        yield f"127.0.0.1:{port}"
    finally:
        container.stop()
