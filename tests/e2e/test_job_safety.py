"""What `kstream run` refuses or repairs: a second runner, a reused job name, damaged checkpoints.

Every test drives real `kstream run` / `kstream worker` processes against a real broker.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from test_cli_run import JOB_FILE, kstream, wait_for, worker_processes

from kstream.infra.admin import Admin
from kstream.runtime.control import read_history
from kstream.testing import produce, read_all, unique_name, wait_settled

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

WORDS = [f"w{i}" for i in range(40)]


def lines(n: int, salt: int = 0) -> list[str]:
    return [" ".join(WORDS[(i * 7 + j + salt) % len(WORDS)] for j in range(3)) for i in range(n)]


class Job:
    """One word-count job (a job file, a name, a state directory) run as a user runs it."""

    def __init__(
        self, bootstrap: str, tmp_path: Path, name: str | None = None, *options: str
    ) -> None:
        self.bootstrap = bootstrap
        #: Options every run and worker of the job is given (e.g. its checkpoint storage).
        self.options = options
        self.name = name or unique_name("safe")
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.state = tmp_path / "state"
        self.file = tmp_path / "wc.py"
        self.file.write_text(JOB_FILE)

    def run(self, src: str, dst: str, *extra: str) -> subprocess.Popen[str]:
        return kstream(
            "run", f"{self.file}:job", "-p", f"input={src}", "-p", f"output={dst}",
            "--bootstrap-servers", self.bootstrap, "--workers", "2", "--job-name", self.name,
            "--state-dir", str(self.state), "--checkpoint-interval", "0.5",
            *self.options, *extra,
        )  # fmt: skip

    def worker(self, src: str, dst: str, index: int, workers: int = 2) -> subprocess.Popen[str]:
        return kstream(
            "worker", f"{self.file}:job", "-p", f"input={src}", "-p", f"output={dst}",
            "--bootstrap-servers", self.bootstrap, "--worker", str(index),
            "--workers", str(workers),
            "--job-name", self.name, "--state-dir", str(self.state), *self.options,
        )  # fmt: skip

    def completed(self) -> list[int]:
        return [m["checkpoint"] for m in read_history(self.bootstrap, self.name)
                if m.get("type") == "complete"]  # fmt: skip

    def checkpoint_dir(self, n: int) -> Path:
        return self.state / self.name / "checkpoints" / f"chk-{n}"


def counts(bootstrap: str, topic: str) -> dict[str, list[int]]:
    """Each word's output values, read with read_committed, in output order."""
    seen: dict[str, list[int]] = defaultdict(list)
    for r in read_all(bootstrap, topic):
        seen[(r.key or b"").decode()].append(int(r.value or b"0"))
    return dict(seen)


def truth(text: list[str]) -> Counter[str]:
    return Counter(w for line in text for w in line.split())


def caught_up(bootstrap: str, topic: str, expected: Counter[str]) -> bool:
    return {w: max(v) for w, v in counts(bootstrap, topic).items()} == dict(expected)


def stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM a runner; its stderr once it exited cleanly."""
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 0, stderr
    return stderr


def refused(proc: subprocess.Popen[str], what: str) -> str:
    """The stderr of a process that must exit with 2 at start-up; fails if it keeps running."""
    try:
        _, stderr = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        # SIGTERM, not SIGKILL: a runner stops its workers only on a clean stop.
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=90)
        pytest.fail(f"{what} was not refused: it was still running after 90 s")
    assert proc.returncode == 2, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "Traceback" not in stderr
    return stderr


def assert_exactly_once(bootstrap: str, topic: str, expected: Counter[str]) -> None:
    wait_settled(bootstrap, topic)
    outputs = counts(bootstrap, topic)
    assert set(outputs) == set(expected)
    for word, values in outputs.items():
        assert sorted(values) == list(range(1, expected[word] + 1)), word


# -- one runner per job ------------------------------------------------------------


def test_a_second_runner_and_a_taken_worker_index_are_refused(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = lines(3000)
    produce(bootstrap, src, [(None, line.encode()) for line in text])
    job = Job(bootstrap, tmp_path)
    first = job.run(src, dst)
    try:
        wait_for(lambda: len(worker_processes(job.name)) == 2, 90, "two worker processes")
        second = refused(job.run(src, dst), "a second `kstream run` of the running job")
        assert f"job {job.name} is already running" in second
        assert f"pid {first.pid}" in second
        taken = refused(job.worker(src, dst, 0), "a second worker 0")
        assert f"worker 0 of job {job.name} is already running" in taken
        # The kernel drops a SIGKILLed worker's lock: the runner's replacement starts.
        victim = worker_processes(job.name)[0]
        os.kill(victim, signal.SIGKILL)
        wait_for(
            lambda: (
                len(worker_processes(job.name)) == 2 and victim not in worker_processes(job.name)
            ),
            90,
            "the killed worker to be replaced",
        )
        wait_for(lambda: caught_up(bootstrap, dst, truth(text)), 180, "every count")
    finally:
        stop(first)
    assert_exactly_once(bootstrap, dst, truth(text))


# -- a reused job name -------------------------------------------------------------


def test_a_reused_name_on_other_input_is_refused_and_fresh_counts_only_the_new_input(
    bootstrap: str, tmp_path: Path
) -> None:
    a, b, out_a, out_b = (unique_name(p) for p in ("a", "b", "out-a", "out-b"))
    Admin(bootstrap).create_topics({a: 2, b: 2, out_a: 2, out_b: 2})
    text_a, text_b = lines(1500), lines(2000, salt=3)
    produce(bootstrap, a, [(None, line.encode()) for line in text_a])
    produce(bootstrap, b, [(None, line.encode()) for line in text_b])
    job = Job(bootstrap, tmp_path)
    run_a = job.run(a, out_a)
    try:
        wait_for(lambda: caught_up(bootstrap, out_a, truth(text_a)), 180, "A's counts")
        wait_for(lambda: len(job.completed()) >= 2, 60, "checkpoints of A's counts")
    finally:
        stop(run_a)

    message = refused(job.run(b, out_b), "resuming A's checkpoint on topic B")
    assert f"sources kafka:{a} -> kafka:{b}" in message
    assert "--fresh" in message
    assert "--accept-changes" in message

    run_b = job.run(b, out_b, "--fresh")
    try:
        wait_for(lambda: caught_up(bootstrap, out_b, truth(text_b)), 180, "B's counts")
    finally:
        stderr = stop(run_b)
    assert "fresh" in stderr
    assert_exactly_once(bootstrap, out_b, truth(text_b))
    # After the fresh start the job resumes normally, now as B's job.
    resumed = job.run(b, out_b)
    wait_for(lambda: len(worker_processes(job.name)) == 2, 90, "the resumed job's workers")
    assert "resuming from checkpoint" in stop(resumed)


# -- damaged checkpoints -------------------------------------------------------------


def damage(job: Job, n: int, how: str) -> None:
    chk = job.checkpoint_dir(n)
    if how == "meta.json edited":
        meta = next(chk.glob("s1-*/meta.json"))
        meta.write_text(meta.read_text()[:-1])  # a closing brace lost: not JSON any more
    elif how == ".sst deleted":
        next(chk.glob("s1-*/db/*.sst")).unlink()
    elif how == "chk directory deleted":
        shutil.rmtree(chk)
    else:  # damage the manifest cannot see: only RocksDB finds it, in the worker
        sst = next(chk.glob("s1-*/db/*.sst"))
        manifest = sst.parent.parent / "manifest.json"
        listed = json.loads(manifest.read_text())
        del listed["files"][sst.relative_to(manifest.parent).as_posix()]
        manifest.write_text(json.dumps(listed))
        sst.unlink()


def run_until_checkpointed(job: Job, src: str, dst: str, text: list[str]) -> int:
    """Run the job until its output is complete and two more checkpoints; the newest id."""
    proc = job.run(src, dst)
    try:
        wait_for(lambda: caught_up(job.bootstrap, dst, truth(text)), 180, "every count")
        done = len(job.completed())
        wait_for(lambda: len(job.completed()) >= done + 2, 60, "two more checkpoints")
    finally:
        stop(proc)
    return max(job.completed())


@pytest.mark.parametrize(
    "how",
    ["meta.json edited", ".sst deleted", "chk directory deleted", "damage only RocksDB sees"],
)
def test_a_damaged_newest_checkpoint_falls_back_loudly_to_the_previous_one(
    bootstrap: str, tmp_path: Path, how: str
) -> None:
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    first, more = lines(2000), lines(1000, salt=5)
    produce(bootstrap, src, [(None, line.encode()) for line in first])
    job = Job(bootstrap, tmp_path)
    newest = run_until_checkpointed(job, src, dst, first)
    damage(job, newest, how)
    resumes_loudly_from_before(job, src, dst, newest, first, more)


def resumes_loudly_from_before(
    job: Job, src: str, dst: str, newest: int, first: list[str], more: list[str]
) -> None:
    """`job`, whose checkpoint `newest` is damaged and whose input `first` was counted,
    run again with `more` input: it says once that it falls back past `newest`, and
    every count of the whole input is output (some perhaps twice: the fallback)."""
    produce(job.bootstrap, src, [(None, line.encode()) for line in more])
    proc = job.run(src, dst)
    try:
        wait_for(lambda: caught_up(job.bootstrap, dst, truth(first + more)), 180, "every count")
    finally:
        if proc.poll() is None:
            stderr = stop(proc)
        else:
            _, stderr = proc.communicate()
            pytest.fail(f"the job stopped: {stderr}")
    warnings = [line for line in stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1, stderr
    warning = warnings[0]
    assert f"checkpoint {newest} " in warning
    assert "damaged" in warning
    assert "falling back to checkpoint" in warning
    assert "written again" in warning
    # Every count 1..N is there; falling back past a completed checkpoint may repeat output.
    outputs = counts(job.bootstrap, dst)
    for word, n in truth(first + more).items():
        assert set(outputs[word]) == set(range(1, n + 1)), word


def test_no_intact_checkpoint_stops_with_one_line_and_no_crash_loop(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = lines(1000)
    produce(bootstrap, src, [(None, line.encode()) for line in text])
    job = Job(bootstrap, tmp_path)
    run_until_checkpointed(job, src, dst, text)
    for chk in (job.state / job.name / "checkpoints").glob("chk-*"):
        shutil.rmtree(chk)
    logs = sorted((job.state / job.name / "logs").iterdir())
    sizes = [p.stat().st_size for p in logs]
    message = refused(job.run(src, dst), "a job without any intact checkpoint")
    assert "no intact checkpoint remains: damaged checkpoint" in message
    assert "--fresh" in message
    # Refused before any worker started: no restarts into the same failure.
    assert [p.stat().st_size for p in logs] == sizes


def test_a_runner_of_the_job_with_another_state_dir_is_refused_while_the_first_runs(
    bootstrap: str, tmp_path: Path
) -> None:
    """Job names scope Kafka topics and transactional ids, not only state directories."""
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = lines(2000)
    produce(bootstrap, src, [(None, line.encode()) for line in text])
    job = Job(bootstrap, tmp_path / "here")
    first = job.run(src, dst)
    try:
        wait_for(lambda: len(worker_processes(job.name)) == 2, 90, "two worker processes")
        elsewhere = Job(bootstrap, tmp_path / "elsewhere", name=job.name)
        second = refused(elsewhere.run(src, dst), "a runner of the job in another state dir")
        assert f"job {job.name} is already running on {bootstrap}" in second
        assert f"pid {first.pid}" in second
        assert str(job.state) in second
        wait_for(lambda: caught_up(bootstrap, dst, truth(text)), 180, "every count")
    finally:
        stderr = stop(first)
    assert "taking over" not in stderr
    assert_exactly_once(bootstrap, dst, truth(text))
    # A runner that stopped cleanly said so: the next start does not wait for it.
    again = job.run(src, dst)
    wait_for(lambda: len(worker_processes(job.name)) == 2, 90, "the restarted job's workers")
    assert "taking over" not in stop(again)
