"""The control and commit-marker topics are purged behind what restarts read, on a real broker.

The word count runs with checkpoints every 0.2 s and no control history kept
beyond what a restart needs (`Runner.control_history = 0`), until both
topics' log starts have moved forward. Then a worker is SIGKILLed (its
replacement joins from the purged control topic), the runner is stopped once
the first half of the input is covered, and a new runner of the same job is
started: it must resume from the latest completed checkpoint, read from the
purged topic, and the whole output, read read_committed, must hold every
word's counts 1..N exactly once (sinks recovered from purged marker
partitions).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from kstream.examples import wordcount
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import commit_topic, control_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.preflight import INTERNAL_SEGMENT_MS
from kstream.runtime.runner.runner import Runner
from kstream.testing import Feeder, read_all, run_until_consumed, unique_name, wait_settled
from kstream.tools.demo import check_running_counts

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PARTITIONS = 2
LINES = 8_000
#: How long the first runner may take to purge both topics.
PURGE_DEADLINE_S = 120.0


def lines_of(seed: int) -> list[str]:
    rnd = random.Random(seed)
    vocab = [f"w{i:03d}" for i in range(300)]
    return [" ".join(rnd.choices(vocab, k=rnd.randint(3, 9))) for _ in range(LINES)]


def new_runner(bootstrap: str, state: Path, params: dict[str, str], say: list[str]) -> Runner:
    runner = Runner(
        RunConfig(
            JobRef("kstream.examples.wordcount:job", params),
            bootstrap,
            2,
            state,
            checkpoints=CoordinatorConfig(interval=0.2, timeout=60.0),
        ),
        wordcount.job(params),
        say=say.append,
    )
    runner.control_history = 0  # purge all a restart does not read
    runner.prepare()
    return runner


def log_starts(admin: Admin, topic: str) -> list[int]:
    return [low for low, _ in admin.watermarks(topic).values()]


def test_purged_control_and_commit_topics_still_restart_exactly_once(
    bootstrap: str, tmp_path: Path
) -> None:
    run = unique_name("bounded")
    src, dst = f"{run}-in", f"{run}-out"
    admin = Admin(bootstrap)
    admin.create_topics({src: PARTITIONS, dst: PARTITIONS})
    lines = lines_of(3)
    half = LINES // 2
    params = {"input": src, "output": dst, "name": f"b-{run}"}
    job = params["name"]
    said: list[str] = []

    first = Feeder(bootstrap, src, [s.encode() for s in lines[:half]], PARTITIONS, rate=200.0)
    runner = new_runner(bootstrap, tmp_path, params, said)
    running = runner.start()
    try:
        # Run until both topics were purged, then SIGKILL a worker: its replacement
        # joins from the purged control topic, the sinks recover from purged markers.
        deadline = time.monotonic() + PURGE_DEADLINE_S
        checked = 0.0
        while True:
            running.step()
            if runner.stats.latest is not None:
                # Fed once the workers are up, so that many epochs carry output
                # (an epoch without output writes no transaction, hence no marker).
                first.feed()
            now = time.monotonic()
            if now - checked >= 1.0:  # the broker's log starts, polled with a deadline
                checked = now
                if all(log_starts(admin, control_topic(job))) and all(
                    log_starts(admin, commit_topic(job))
                ):
                    break
            assert now < deadline, f"not purged in {PURGE_DEADLINE_S:.0f}s: {said}"
        purged_at = runner.stats.latest
        pids = running.worker_pids()
        os.kill(pids[0], signal.SIGKILL)
        said.append(f"SIGKILLed worker 0 after checkpoint {purged_at}")
        while not (
            runner.stats.recoveries >= 1
            and all(
                runner.stats.source_offsets.get(src, {}).get(p, 0) >= end
                for p, end in first.ends.items()
            )
        ):
            running.step()
            first.feed()
            assert time.monotonic() < deadline + 300, said
    finally:
        running.stop()
    latest = runner.stats.latest
    assert latest is not None
    assert all(log_starts(admin, control_topic(job))), "control topic not purged"
    assert all(log_starts(admin, commit_topic(job))), "commit markers not purged"
    # Disk follows the purge by whole segments: internal topics roll them often.
    internal = [control_topic(job), commit_topic(job)]
    assert set(admin.topic_config(internal, "segment.ms").values()) == {str(INTERNAL_SEGMENT_MS)}

    # A new runner of the job reads the purged control topic: it must resume, not start over.
    again: list[str] = []
    second = Feeder(bootstrap, src, [s.encode() for s in lines[half:]], PARTITIONS, rate=None)
    second.feed()
    ends = {p: first.ends[p] + second.ends[p] for p in range(PARTITIONS)}
    runner = new_runner(bootstrap, tmp_path, params, again)
    run_until_consumed(runner, src, ends, say=again.append)
    assert f"resuming from checkpoint {latest}" in again, again
    wait_settled(bootstrap, dst)
    check = check_running_counts(lines, read_all(bootstrap, dst))
    assert check.output_exact, (check, said, again)
    assert check.outputs == sum(len(line.split()) for line in lines)
