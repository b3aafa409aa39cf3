"""An internal topic deleted between runs: a restart that would resume the job's
checkpoint is refused with one line naming the topic and the way on; with
--fresh the job starts over and its output is right.

A checkpoint points into the job's internal topics: the control topic holds
its completion (without it a restart would start from scratch while the
checkpoint is on disk), the commit-marker topic tells a sink which of the
checkpoint's epochs are published already, and a channel topic must hold the
records after the positions the checkpoint recorded.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest
from test_cli_run import JOB_FILE, kstream, wait_for
from test_topic_deleted import completed, delete_topic

from kstream.infra.admin import Admin
from kstream.protocol.names import channel_topic, commit_topic, control_topic
from kstream.testing import Feeder, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: How the command line starts the one line of a refusal or failure.
PROBLEM = ("kstream: error:", "kstream: failed:")


def start(
    bootstrap: str, tmp_path: Path, src: str, dst: str, name: str, *more: str
) -> subprocess.Popen[str]:
    return kstream(
        "run", "myjob.py:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5", *more,
        cwd=tmp_path,
    )  # fmt: skip


def stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM the runner; its stderr once it exited (cleanly)."""
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    return stderr


def refused(proc: subprocess.Popen[str]) -> str:
    """The stderr of a run expected to refuse to start (exit 2); fails if it ran instead."""
    try:
        _, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        stderr = stop(proc)
        pytest.fail(f"the run was not refused; it ran until stopped: {stderr[-2000:]}")
    assert proc.returncode == 2, stderr
    return stderr


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    return {p: high for p, (_, high) in Admin(bootstrap).watermarks(topic).items()}


# One topic in the default tier; the other two take ~55 s each (extended tier).
@pytest.mark.parametrize(
    "lost",
    [
        "control",
        pytest.param("commits", marks=pytest.mark.extended),
        pytest.param("channel", marks=pytest.mark.extended),
    ],
)
def test_a_restart_after_an_internal_topic_was_deleted_is_refused(
    bootstrap: str, tmp_path: Path, lost: str
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name(f"lost-{lost}")
    topic = control_topic(name) if lost == "control" else commit_topic(name)
    if lost == "channel":
        topic = channel_topic(name, 1)
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    lines = [f"a b c{i % 7}" for i in range(15_000)]
    # Input keeps arriving until the job has stopped, so every epoch has output and
    # the checkpoint the job stops at holds an epoch its sink had yet to publish.
    feeder = Feeder(bootstrap, src, [line.encode() for line in lines], 2, rate=300)
    stopped = threading.Event()

    def feed() -> None:
        while not stopped.wait(0.02):
            feeder.feed()

    feeding = threading.Thread(target=feed)
    proc = start(bootstrap, tmp_path, src, dst, name)
    feeding.start()
    try:
        wait_for(
            lambda: completed(bootstrap, name) >= 3 and len(read_all(bootstrap, dst)) > 0,
            120,
            "three completed checkpoints and some output",
        )
    finally:
        stop(proc)
        stopped.set()
        feeding.join()
    assert feeder.sent < len(lines), "the input ran out before the job stopped"
    delete_topic(bootstrap, topic)
    before = ends(bootstrap, dst)

    stderr = refused(start(bootstrap, tmp_path, src, dst, name))
    assert "Traceback" not in stderr
    problem = [line for line in stderr.splitlines() if line.startswith(PROBLEM)]
    assert len(problem) == 1, stderr
    assert problem[0].startswith(f"kstream: error: job {name} cannot resume checkpoint "), stderr
    assert f"internal topic {topic} " in problem[0], stderr
    assert "--fresh" in problem[0], stderr
    # The refused run wrote nothing.
    assert ends(bootstrap, dst) == before

    # With --fresh the job starts over: it reads the whole input again, and its
    # own output counts every word from 1 without gap or repeat.
    wait_for(lambda: feeder.feed() or feeder.sent == len(lines), 60, "the rest of the input")
    truth = Counter(w for line in lines for w in line.split())

    def fresh_counts() -> dict[str, list[int]]:
        seen: dict[str, list[int]] = {}
        for r in read_all(bootstrap, dst):
            if r.offset >= before[r.partition]:
                seen.setdefault((r.key or b"").decode(), []).append(int(r.value or b"0"))
        return seen

    def caught_up() -> bool:
        best = {w: max(c) for w, c in fresh_counts().items()}
        over = {w: n for w, n in best.items() if n > truth[w]}
        assert not over, f"the fresh run counted more than the input holds: {over}"
        return best == dict(truth)

    proc = start(bootstrap, tmp_path, src, dst, name, "--fresh")
    try:
        wait_for(caught_up, 180, "the fresh run's counts")
    finally:
        stop(proc)
    for word, counts in fresh_counts().items():
        assert counts == list(range(1, truth[word] + 1)), (word, counts[:10])


def test_a_control_topic_deleted_while_the_job_runs_stops_it_with_one_line(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("lost-control-run")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    feeder = Feeder(bootstrap, src, [f"a b c{i % 7}".encode() for i in range(1000)], 2, None)
    feeder.feed()
    proc = start(bootstrap, tmp_path, src, dst, name)
    try:
        wait_for(lambda: len(read_all(bootstrap, dst)) == 3000, 120, "the outputs")
        delete_topic(bootstrap, control_topic(name))
        _, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            stop(proc)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    problem = [line for line in stderr.splitlines() if line.startswith(PROBLEM)]
    assert problem == [
        f"kstream: failed: internal topic {control_topic(name)} no longer exists (deleted "
        "while the job ran?): the job's checkpoints point into it: start the job again "
        "with --fresh"
    ], stderr
