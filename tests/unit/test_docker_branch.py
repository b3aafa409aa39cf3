"""The suite's Docker branch (tests/kafka_container.py) under the suite's own rules.

No Docker engine is needed here: these tests pin down what happens before a
container starts, on every machine.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kstream.errors import EnvironmentSetupError, PortInUseError

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    """A port nothing listens on now (the kernel's pick), so the port check passes."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_docker_branch_imports_cleanly_under_the_suites_warning_filters(tmp_path: Path) -> None:
    # A fresh interpreter, so testcontainers is imported for the first time, by
    # a test run with the project's pytest configuration (warnings are errors):
    # exactly the situation of the conftest's Docker branch on a machine with Docker.
    probe = tmp_path / "test_probe.py"
    probe.write_text("def test_import() -> None:\n    import kafka_container  # noqa: F401\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(ROOT),
            str(probe),
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout


def test_without_a_docker_engine_the_docker_branch_fails_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kafka_container import kafka_container

    # A socket path where no engine listens: what KSTREAM_TEST_KAFKA=docker meets
    # on a machine whose engine is stopped.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-engine.sock'}")
    with pytest.raises(EnvironmentSetupError) as caught, kafka_container(_free_port()):
        pytest.fail("a container started without a Docker engine")
    message = str(caught.value)
    assert "\n" not in message
    assert "no Docker engine answers" in message
    assert "KSTREAM_TEST_KAFKA=local" in message


def test_a_taken_port_is_one_line_before_any_container_starts() -> None:
    from kafka_container import kafka_container

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        # Any free port: the test holds it, as another program would.
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUseError) as caught, kafka_container(port):
            pytest.fail("a container started on a port another program holds")
    message = str(caught.value)
    assert "\n" not in message
    assert f"port {port} on 127.0.0.1 is in use" in message
