"""Savepoints as a user takes them: `kstream savepoint` against a running `kstream run`.

Real processes, a real broker, output read with read_committed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from test_cli_run import worker_processes
from test_job_safety import Job, assert_exactly_once, caught_up, lines, truth

from kstream.infra.admin import Admin
from kstream.testing import produce, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def savepoint(bootstrap: str, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kstream", "savepoint", "--job-name", name,
         "--bootstrap-servers", bootstrap, *extra],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def wait_for(predicate: object, timeout: float, what: str) -> None:
    from test_cli_run import wait_for as wait

    wait(predicate, timeout, what)


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
