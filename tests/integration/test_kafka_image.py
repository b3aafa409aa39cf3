"""The suite's Docker branch against a real Docker engine (skipped where none answers)."""

from __future__ import annotations

import socket

import docker
import pytest
from docker.errors import DockerException

from kstream.errors import EnvironmentSetupError


def _engine_answers() -> bool:
    try:
        client = docker.from_env()
        try:
            return bool(client.ping())
        finally:
            client.close()
    except DockerException:
        return False


def _free_port() -> int:
    """A port nothing listens on now (the kernel's pick), so the port check passes."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


pytestmark = pytest.mark.skipif(not _engine_answers(), reason="no Docker engine answers")


def test_a_missing_image_is_one_line_naming_the_command_that_builds_it() -> None:
    from kafka_container import BUILD_COMMAND, kafka_container

    with (
        pytest.raises(EnvironmentSetupError) as caught,
        kafka_container(_free_port(), image="kstream/kafka:0.0.0-never-built"),
    ):
        pytest.fail("a container started from an image that does not exist")
    message = str(caught.value)
    assert "\n" not in message
    assert "kstream/kafka:0.0.0-never-built is missing" in message
    assert BUILD_COMMAND in message
