"""`kstream run` / `kstream worker` / `kstream checkpoints` as a user runs them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from kstream.infra.admin import Admin
from kstream.runtime.control import read_history
from kstream.runtime.failure import CAUSE_DIR_ENV
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

JOB_FILE = """
from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource


def explode(line):
    if "poison" in line:
        raise ValueError("poisoned line")
    return line.split()


def count(word, _, state):
    n = state.get(0) + 1
    state.set(n)
    yield word, n


def job(params):
    j = Job("cli-test", on_error=params.get("on_error", "dead-letter"))
    (j.source(KafkaSource(params["input"]))
        .flat_map(explode)
        .key_by(lambda w: w)
        .process(count, name="count")
        .sink(KafkaSink(params["output"])))
    return j
"""


def kstream(*args: str, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kstream", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,  # type: ignore[call-overload]
    )


def job_processes(job_name: str) -> list[int]:
    """Every `kstream worker` process of the job: workers and standbys."""
    pids = []
    # A standby's command line names no job: the directory it reports its end to does.
    causes = f"{CAUSE_DIR_ENV}=".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            # A worker told its index names itself ("kstream worker 1 of job ..."): one
            # string, where a standby's command line is one argument per string.
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").split()
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        standby = b"--standby" in cmd and any(
            v.startswith(causes) and Path(v[len(causes) :].decode()).parent.name == job_name
            for v in env
        )
        if b"worker" in cmd and b"kstream" in cmd and (job_name.encode() in cmd or standby):
            pids.append(int(proc.name))
    return pids


def worker_processes(job_name: str) -> list[int]:
    """The job's processes told their worker index: those writing to a worker's log
    (a standby, the spare among them, writes to the standby log)."""
    pids = []
    for pid in job_processes(job_name):
        try:
            out = os.readlink(f"/proc/{pid}/fd/1")
        except OSError:
            continue
        if Path(out).name.startswith("worker-"):
            pids.append(pid)
    return pids


def wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.2)  # polling an external system's state; no event to wait on
    raise AssertionError(f"timed out waiting for {what}")


def test_run_recovers_dead_letters_and_stops_cleanly(bootstrap: str, tmp_path: Path) -> None:
    admin = Admin(bootstrap)
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("cli-job")
    admin.create_topics({src: 2, dst: 2})
    lines = [f"a b c{i % 7}" for i in range(3000)] + ["poison pill"] + ["a z"] * 500
    produce(bootstrap, src, [(None, line.encode()) for line in lines])
    job_file = tmp_path / "myjob.py"
    job_file.write_text(JOB_FILE)
    proc = kstream(
        "run", f"{job_file}:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
    )  # fmt: skip
    try:
        wait_for(lambda: len(worker_processes(name)) == 2, 60, "two worker processes")
        victim = worker_processes(name)[0]
        os.kill(victim, signal.SIGKILL)
        wait_for(
            lambda: len(worker_processes(name)) == 2 and victim not in worker_processes(name),
            60,
            "the killed worker to be replaced",
        )
        truth = Counter(w for line in lines if "poison" not in line for w in line.split())

        def caught_up() -> bool:
            seen: dict[str, int] = defaultdict(int)
            for r in read_all(bootstrap, dst):
                word = (r.key or b"").decode()
                seen[word] = max(seen[word], int(r.value or b"0"))
            return dict(seen) == dict(truth)

        wait_for(caught_up, 120, "every word's count to reach its number of occurrences")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert job_processes(name) == [], "SIGTERM must stop every worker and the spare"

    # Dead letters are written at least once (without a transaction): a recovery
    # that restores a checkpoint taken before the pill writes its dead letter again.
    dead = read_all(bootstrap, f"kstream.{name}.dead-letters")
    assert {r.value for r in dead} == {b"poison pill"}
    assert len({dict(r.headers)["kstream.src.offset"] for r in dead}) == 1
    headers = dict(dead[0].headers)
    assert headers["kstream.error"].startswith(b"ValueError: poisoned line")
    assert headers["kstream.src.topic"] == src.encode()
    assert b"Traceback" in headers["kstream.stack"]

    history = read_history(bootstrap, name)
    assert any(m["type"] == "complete" for m in history)
    assert sum(m["type"] == "recover" for m in history) >= 2  # start + the kill

    listing = kstream("checkpoints", "--job-name", name, "--bootstrap-servers", bootstrap)
    out, err = listing.communicate(timeout=60)
    assert listing.returncode == 0, err
    assert "completed" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no.such.module:job"], "cannot import module 'no.such.module'"),
        (["kstream.examples.wordcount:nothing"], "has no attribute 'nothing'"),
        (["kstream.examples.wordcount:job", "-p", "input=missing-topic-xyz"], "does not exist"),
        (["kstream.examples.wordcount:job", "-p", "oops"], "must look like KEY=VALUE"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    bootstrap: str, tmp_path: Path, args: list[str], message: str
) -> None:
    proc = kstream(
        "run", *args, "--bootstrap-servers", bootstrap, "--state-dir", str(tmp_path),
    )  # fmt: skip
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert message in stderr
    assert "Traceback" not in stderr


def test_unreachable_broker_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = kstream(
        "run", "kstream.examples.wordcount:job", "--bootstrap-servers", "127.0.0.1:9",
        "--state-dir", str(tmp_path),
    )  # fmt: skip
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "did not answer" in stderr
    assert "Traceback" not in stderr


def test_ps_tells_the_workers_apart_by_their_index(bootstrap: str, tmp_path: Path) -> None:
    admin = Admin(bootstrap)
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("ps")
    admin.create_topics({src: 2, dst: 2})
    job_file = tmp_path / "myjob.py"
    job_file.write_text(JOB_FILE)
    proc = kstream(
        "run", f"{job_file}:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip
    try:
        wait_for(lambda: len(worker_processes(name)) == 2, 60, "two worker processes")
        titles = sorted(
            Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode()
            for pid in worker_processes(name)
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert [t.split(" (")[0] for t in titles] == [
        f"kstream worker 0 of job {name}",
        f"kstream worker 1 of job {name}",
    ], titles
