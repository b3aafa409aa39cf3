"""The suite's Docker branch (tests/kafka_container.py) under the suite's own rules.

No Docker engine is needed here: these tests pin down what happens before a
container starts, on every machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kstream.errors import EnvironmentSetupError

ROOT = Path(__file__).resolve().parents[2]


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
    with pytest.raises(EnvironmentSetupError) as caught, kafka_container(23999):
        pytest.fail("a container started without a Docker engine")
    message = str(caught.value)
    assert "\n" not in message
    assert "no Docker engine answers" in message
    assert "KSTREAM_TEST_KAFKA=local" in message
