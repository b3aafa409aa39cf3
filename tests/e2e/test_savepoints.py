"""Savepoints as a user takes them: `kstream savepoint` against a running `kstream run`.

Real processes, a real broker, output read with read_committed. Jobs moved from
savepoint to savepoint at other parallelisms are in test_rescale.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from job_runs import run_cli, savepoint, stop_with_savepoint
from test_cli_run import wait_for, worker_processes
from test_job_safety import Job, assert_exactly_once, caught_up, lines, stop, truth

from kstream.infra.admin import Admin
from kstream.testing import produce, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def test_savepoint_stop_writes_a_self_contained_savepoint_and_stops(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = lines(2000)
    produce(bootstrap, src, [(None, line.encode()) for line in text])
    job = Job(bootstrap, tmp_path)
    run = job.run(src, dst)
    try:
        wait_for(lambda: caught_up(bootstrap, dst, truth(text)), 90, "the job to catch up")
        done = savepoint(bootstrap, job.name, "--stop", "--timeout-s", "60")
        assert done.returncode == 0, done.stderr
        url = done.stdout.strip()
        assert url.startswith("file://"), done.stdout
        _, stderr = run.communicate(timeout=60)
        assert run.returncode == 0, stderr
        assert "stopping after its savepoint" in stderr
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert worker_processes(job.name) == []
    root = Path(urlsplit(url).path)
    info = json.loads((root / "savepoint.json").read_text())
    assert info["version"] == 1
    assert info["job"] == job.name
    assert info["parallelism"] == [2, 2]
    assert info["max_parallelism"] == 128
    assert info["states"] == ["s1.count"]
    n = info["checkpoint"]
    snapshots = sorted(p.name for p in (root / f"chk-{n}").iterdir())
    assert snapshots == ["s0-0", "s0-1", "s1-0", "s1-1"]
    for task in snapshots:
        manifest = json.loads((root / f"chk-{n}" / task / "manifest.json").read_text())
        assert all("sha256" in e and "shared" not in e for e in manifest["files"].values())
    # Inside the job's checkpoint storage, yet never swept: a savepoint, not a checkpoint.
    assert root.parent == job.state / job.name / "checkpoints" / "savepoints"
    # Every checkpoint's output committed, nothing after it: exactly once, all of it.
    assert_exactly_once(bootstrap, dst, truth(text))


def test_savepoint_of_a_job_not_running_is_refused(bootstrap: str, tmp_path: Path) -> None:
    missing = savepoint(bootstrap, unique_name("nojob"), "--timeout-s", "5")
    assert missing.returncode == 2
    assert "never ran here" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr


def run_job(
    job: Job, src: str, dst: str, name: str, workers: int, *extra: str
) -> subprocess.Popen[str]:
    """The word count of `job` from `src` to `dst` under `name`."""
    params = {"input": src, "output": dst}
    return run_cli(
        job.bootstrap, f"{job.file}:job", params, name=name, workers=workers, state=job.state,
        extra=extra,
    )  # fmt: skip


def test_a_savepoint_of_another_job_is_refused_with_the_reason(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = lines(200)
    produce(bootstrap, src, [(None, line.encode()) for line in text])
    job = Job(bootstrap, tmp_path)
    run = run_job(job, src, dst, job.name, 2)
    wait_for(lambda: caught_up(bootstrap, dst, truth(text)), 90, "the job to catch up")
    url = stop_with_savepoint(bootstrap, job.name, run)
    # The same job file with its counting operator renamed: its state has no taker.
    other = tmp_path / "other.py"
    other.write_text(job.file.read_text().replace('name="count"', 'name="tally"'))
    job.file = other
    refused = run_job(job, src, dst, f"{job.name}-other", 2, "--from-savepoint", url)
    _, stderr = refused.communicate(timeout=90)
    assert refused.returncode == 2, stderr
    assert "cannot start from savepoint" in stderr
    assert "operators" in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "s1.count" in stderr  # the state without a taker
    # Nothing was imported: the job name has no checkpoint.
    assert not list((job.state / f"{job.name}-other").glob("checkpoints/chk-*"))
    # Renamed with its old name as uid, the operator takes its state: counts go on.
    renamed = tmp_path / "renamed.py"
    renamed.write_text(other.read_text().replace('name="tally")', 'name="tally").uid("count")'))
    job.file = renamed
    more = lines(100, salt=1)
    produce(bootstrap, src, [(None, line.encode()) for line in more])
    run = run_job(job, src, dst, f"{job.name}-renamed", 1, "--from-savepoint", url)
    try:
        wait_for(lambda: caught_up(bootstrap, dst, truth(text + more)), 90, "the renamed job")
    finally:
        run.terminate()
        run.communicate(timeout=60)
    assert_exactly_once(bootstrap, dst, truth(text + more))


def test_a_savepoint_taken_up_by_workers_started_elsewhere_at_another_parallelism(
    bootstrap: str, tmp_path: Path
) -> None:
    """As on Kubernetes: the coordinator (`kstream run --no-spawn --from-savepoint`)
    and three workers started on their own (`kstream worker --worker I --workers 3`)
    take up a savepoint of a job that ran two; every count goes on exactly once."""
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 4, dst: 2})
    first, more = lines(2000), lines(1000, salt=7)
    produce(bootstrap, src, [(None, line.encode()) for line in first])
    old = Job(bootstrap, tmp_path / "old")
    run = old.run(src, dst)
    wait_for(lambda: caught_up(bootstrap, dst, truth(first)), 90, "the job to catch up")
    url = stop_with_savepoint(bootstrap, old.name, run)
    new = Job(bootstrap, tmp_path / "new")
    coordinator = new.run(src, dst, "--no-spawn", "--workers", "3", "--from-savepoint", url)
    workers = [new.worker(src, dst, i, workers=3) for i in range(3)]
    procs = [coordinator, *workers]
    try:
        produce(bootstrap, src, [(None, line.encode()) for line in more])

        def done() -> bool:
            exited = [p.returncode for p in procs if p.poll() is not None]
            assert not exited, f"a process of the new job exited: {exited}"
            return caught_up(bootstrap, dst, truth(first + more))

        wait_for(done, 120, "every count")
        stderr = stop(coordinator)
        assert f"importing savepoint {url}" in stderr
        assert "rescaling from" in stderr, stderr
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        # A worker stops cleanly on SIGTERM, as under a supervisor.
        outputs = [p.communicate(timeout=60)[1] for p in workers]
    assert all(p.returncode == 0 for p in workers), outputs
    assert_exactly_once(bootstrap, dst, truth(first + more))
