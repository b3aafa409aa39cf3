"""The containers suite: kstream's images run by a real Docker engine.

Run with ``pytest -m containers tests/containers`` after
``deploy/docker/build-images.sh``; the default run leaves it out (`addopts`).
Without a Docker engine every test skips with one reason. Ryuk (testcontainers'
reaper, an image from a registry) is disabled: everything the suite starts carries
the label ``org.kstream.test=containers`` and the session removes what it left,
then fails if anything was left.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest
from container_job import docker
from kafka_container import LABEL

#: The value of `LABEL` on whatever this suite (and the child sessions it runs) starts.
SUITE_LABEL = "containers"
#: ``--filter`` argument selecting what the suite made.
FILTER = f"label={LABEL}={SUITE_LABEL}"


def engine_problem() -> str | None:
    """Why no Docker engine can serve the suite (one line), or None when one answers."""
    docker = shutil.which("docker")
    if docker is None:
        return "docker is not on PATH"
    try:
        done = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 20 s"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return lines[-1] if lines else f"`docker info` exited {done.returncode}"
    return None


def leftovers() -> list[str]:
    """Containers, networks and volumes carrying the suite's label, as 'kind name' lines."""
    found = []
    for kind, fmt in (
        ("container", "{{.Names}}"),
        ("network", "{{.Name}}"),
        ("volume", "{{.Name}}"),
    ):
        out = docker(
            kind,
            "ls",
            *(["-a"] if kind == "container" else []),
            "--filter",
            FILTER,
            "--format",
            fmt,
        )
        found += [f"{kind} {name}" for name in out.split()]
    return found


def remove_leftovers() -> None:
    for name in docker("container", "ls", "-aq", "--filter", FILTER).split():
        docker("container", "rm", "-f", "-v", name, check=False)
    for name in docker("network", "ls", "-q", "--filter", FILTER).split():
        docker("network", "rm", name, check=False)
    for name in docker("volume", "ls", "-q", "--filter", FILTER).split():
        docker("volume", "rm", "-f", name, check=False)


@pytest.fixture(scope="session", autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """Label the session's Docker objects; afterwards remove and refuse leftovers.
    Without an engine, every test of the suite skips here, so with one reason at one
    place: the summary shows one line."""
    # Asked here, not at import: the default run collects this folder and deselects it.
    problem = engine_problem()
    if problem is not None:
        pytest.skip(f"no Docker engine answers ({problem}): containers suite skipped")
    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
    os.environ["KSTREAM_TEST_DOCKER_LABEL"] = SUITE_LABEL
    remove_leftovers()  # an earlier, interrupted session's
    yield
    left = leftovers()
    remove_leftovers()
    assert left == [], f"the containers suite left Docker objects behind: {left}"
