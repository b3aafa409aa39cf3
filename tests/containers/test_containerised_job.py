"""A job whose every process is a container: killed workers, a restarted coordinator.

The broker is a ``kstream/kafka`` container (testcontainers, host network); the
coordinator (``kstream run --no-spawn``) and two workers (``kstream worker ...
--worker I --workers 2``) are ``kstream/kstream`` containers sharing a checkpoint
volume (`container_job`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from container_job import ContainerJob, log_tail, run_once
from kafka_container import kafka_container
from netns import free_port

from kstream.tools.demo import CountCheck

pytestmark = pytest.mark.containers

#: The label value the suite's conftest checks (`SUITE_LABEL`).
SUITE = "containers"


@pytest.fixture(scope="module")
def broker() -> Iterator[str]:
    with kafka_container(free_port("127.0.0.1")) as bootstrap:
        yield bootstrap


def _assert_exactly_once(checked: tuple[CountCheck, int], job: ContainerJob) -> None:
    check, words = checked
    assert check.wrong_final == [], job.logs()
    assert check.duplicates == 0, job.logs()
    assert check.missing == 0, job.logs()
    assert check.out_of_order == 0, job.logs()
    assert check.outputs == words, job.logs()  # one output per input word


def test_a_killed_worker_container_and_a_restarted_coordinator_container(broker: str) -> None:
    job = ContainerJob(broker, SUITE)
    try:
        job.start()
        job.run_until(lambda: job.committed_outputs() >= job.total // 8, "output committed")
        # A worker's container dies (SIGKILL, no clean-up) and its supervisor starts a
        # replacement container: a new, empty state directory, the same worker index.
        job.kill(f"{job.prefix}-worker1")
        job.start_worker(1, suffix="-replacement")
        _assert_exactly_once(job.check_phase(), job)

        # The coordinator's container is stopped (SIGTERM) and started again: the
        # same container, so the same state directory.
        coordinator = f"{job.prefix}-coordinator"
        assert job.stop(coordinator) == 0, job.logs()
        job.restart(coordinator, "coordinator")
        _assert_exactly_once(job.check_phase(), job)
        assert job.committed_outputs() == job.total
        said = log_tail(coordinator, lines=200)
        # The kill rolled the job back; the restarted coordinator adopted the
        # generation its workers run (they never stopped).
        assert "worker w1 restarted" in said, job.logs()
        assert "adopting generation" in said, job.logs()
        # The image's own audit (Spark on its Java) agrees: every word's counts are 1..N.
        audit = run_once(
            SUITE, "audit", "--input", job.input, "--output", job.output,
            "--bootstrap-servers", broker, "--master", "local[1]", timeout=300,
        )  # fmt: skip
        assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
        # The checkpoints really went to the shared volume.
        listing = run_once(
            SUITE, "/mnt", "-name", "manifest.json",
            options=("--volume", f"{job.volume}:/mnt", "--entrypoint", "find"),
        )  # fmt: skip
        assert listing.returncode == 0, listing.stderr
        assert "manifest.json" in listing.stdout, listing.stdout
    finally:
        job.close()


def _error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("kstream: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_no_reachable_broker_is_the_same_line_in_a_container(tmp_path: Path) -> None:
    """The job's module is mounted into /opt/kstream/jobs (on the image's PYTHONPATH)."""
    port = free_port("127.0.0.1")  # nothing listens there
    jobs = Path(tempfile.mkdtemp(prefix="kstream-ct-jobs-"))
    try:
        (jobs / "mountedjob.py").write_text("from kstream.examples.wordcount import job\n")
        jobs.chmod(0o755)
        (jobs / "mountedjob.py").chmod(0o644)
        args = ["-p", "input=in", "-p", "output=out", "--bootstrap-servers", f"127.0.0.1:{port}"]
        inside = run_once(
            SUITE, "run", "mountedjob:job", *args,
            options=("--volume", f"{jobs}:/opt/kstream/jobs:ro"),
        )  # fmt: skip
    finally:
        for path in jobs.iterdir():
            path.unlink()
        jobs.rmdir()
    outside = subprocess.run(
        [
            sys.executable,
            "-m",
            "kstream",
            "run",
            "kstream.examples.wordcount:job",
            *args,
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "KSTREAM_BOOTSTRAP"},
    )
    assert (inside.returncode, outside.returncode) == (2, 2), inside.stderr + outside.stderr
    line = _error_line(inside.stderr)
    assert line == _error_line(outside.stderr)
    assert line == (
        f"kstream: error: Kafka at 127.0.0.1:{port} did not answer "
        f"(127.0.0.1:{port}: Connection refused)"
    )
