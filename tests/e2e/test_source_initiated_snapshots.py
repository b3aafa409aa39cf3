"""Snapshots started by sources (Lamport ids) on real worker processes and a real broker.

The word count with ``source_snapshot_interval_s``: its first source subtask
starts snapshots itself (`kstream.protocol.initiation`), announced with an
``initiate`` control message, relayed to the other source subtask by the
coordinator. What the control topic says is checked against the design
(docs/internals/barriers.md, "Snapshot ids"): who started each completed snapshot,
that a recovery restores the completed snapshot with the largest id, and that
ids keep growing across a restart of the runner. Output is read with
read_committed and compared with the input (exactly-once).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requesting_job
from wordcount_runs import assert_exactly_once, run_wordcount

from kstream.errors import JobFailedError
from kstream.examples import wordcount
from kstream.infra.admin import Admin
from kstream.protocol.barrier import Alignment
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.messages import (
    Completed,
    ControlMessage,
    Initiated,
    Recovered,
    Triggered,
    checkpoint_of,
)
from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.control import read_messages
from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import produce, read_all, unique_name, wait_settled
from kstream.tools.demo import WordcountOutcome

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: The coordinator's interval when only sources should start snapshots: longer
#: than a run (its first trigger comes this long after each recovery).
COORDINATOR_OFF_S = 200.0


def control_of(outcome: WordcountOutcome) -> list[ControlMessage]:
    run_id = outcome.input_topic.removesuffix("-words")
    return read_messages(outcome.bootstrap, f"wordcount-{run_id}")


def initiators(ids: list[int]) -> set[int]:
    return {SnapshotId.decode(n).initiator for n in ids}


def assert_recoveries_restore_the_largest_completed(control: list[ControlMessage]) -> None:
    completed: list[int] = []
    for m in control:
        if isinstance(m, Completed):
            completed.append(m.checkpoint)
        elif isinstance(m, Recovered):
            assert m.checkpoint == (max(completed) if completed else None), m


def test_word_count_snapshotted_by_its_source_alone_is_exactly_once_across_kills(
    bootstrap: str,
) -> None:
    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        workers=2,
        # Fed over ten seconds: the kills must come before the input is covered.
        lines=20_000,
        rate=2000.0,
        kills=2,
        kill_after=1,
        checkpoint_interval=COORDINATOR_OFF_S,
        source_snapshot_interval_s=0.3,
        seed=31,
    )
    log = "\n".join(messages)
    assert outcome.kills == 2, log
    assert outcome.recoveries >= 2, log
    assert_exactly_once(outcome)
    control = control_of(outcome)
    started = [m for m in control if isinstance(m, Initiated)]
    completed = [m.checkpoint for m in control if isinstance(m, Completed)]
    # Only the first source subtask (initiator 1) starts them; none came from the
    # coordinator, whose interval is longer than the run.
    assert initiators([m.checkpoint for m in started]) == {1}, log
    assert {m.task for m in started} == {"s0-0"}
    assert len(completed) >= 3, log
    assert initiators(completed) == {1}, log
    assert completed == sorted(completed)
    assert_recoveries_restore_the_largest_completed(control)


def test_coordinator_and_source_initiated_snapshots_both_complete_unaligned(
    bootstrap: str,
) -> None:
    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        workers=2,
        lines=20_000,
        rate=2000.0,
        kills=0,
        # Unequal intervals: two initiators on one period would start together
        # (and abort each other) every time. The coordinator triggers only an
        # interval after the last snapshot started anywhere, so a source on a
        # shorter interval would leave it none: the source's is the longer. A
        # source starts one only while no snapshot is in flight, so the
        # coordinator's interval is well above a checkpoint's duration, even on
        # a loaded machine: the source finds a gap after each.
        checkpoint_interval=1.5,
        source_snapshot_interval_s=2.5,
        alignment=Alignment.UNALIGNED,
        seed=37,
    )
    log = "\n".join(messages)
    assert_exactly_once(outcome)
    control = control_of(outcome)
    completed = [m.checkpoint for m in control if isinstance(m, Completed)]
    # Both initiators' snapshots complete: the coordinator's (0) and the source's (1).
    assert initiators(completed) == {COORDINATOR, 1}, log
    assert completed == sorted(completed)
    # Every id was started once: by the coordinator (a trigger that relays no
    # announcement) or by a source (an announcement).
    announced = [m.checkpoint for m in control if isinstance(m, Initiated)]
    own = [
        m.checkpoint
        for m in control
        if isinstance(m, Triggered) and SnapshotId.decode(m.checkpoint).initiator == COORDINATOR
    ]
    assert len(set(announced + own)) == len(announced) + len(own)


def run_until_completed(runner: RunningJob, more: int, timeout: float = 180.0) -> None:
    """Step `runner` until `more` checkpoints completed (a deadline, not a sleep)."""
    deadline = time.monotonic() + timeout
    target = runner.stats.completed + more
    while runner.stats.completed < target:
        assert time.monotonic() < deadline, f"fewer than {more} checkpoints in {timeout:.0f}s"
        runner.step()


def test_ids_keep_growing_across_a_restart_of_the_runner(bootstrap: str, tmp_path: Path) -> None:
    src, dst = unique_name("ids-in"), unique_name("ids-out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    produce(bootstrap, src, [(None, f"a b c{i % 5}".encode()) for i in range(200)])
    params = {"input": src, "output": dst, "name": unique_name("ids")}
    said: list[str] = []

    def runner() -> Runner:
        return Runner(
            RunConfig(
                JobRef("kstream.examples.wordcount:job", params),
                bootstrap,
                1,
                tmp_path / "state",
                checkpoints=CoordinatorConfig(interval=COORDINATOR_OFF_S, timeout=60.0),
                source_snapshot_interval_s=0.2,
            ),
            wordcount.job(params),
            say=said.append,
        )

    first = runner()
    first.prepare()
    running = first.start()
    try:
        run_until_completed(running, 2)
        # Stop while a snapshot is in flight: the largest id is then one that never
        # completed, above the restore point, and the next run must not reuse it.
        deadline = time.monotonic() + 120
        while not running.coordinator.pending:
            assert time.monotonic() < deadline, "no snapshot started after the second"
            running.step()
    finally:
        running.stop()
    before = read_messages(bootstrap, params["name"])
    largest = max(n for m in before if (n := checkpoint_of(m)) is not None)
    restore_point = max(m.checkpoint for m in before if isinstance(m, Completed))
    assert largest > restore_point

    second = runner()
    second.prepare()
    resumed_job = second.start()
    try:
        run_until_completed(resumed_job, 2)
    finally:
        resumed_job.stop()
    after = read_messages(bootstrap, params["name"])[len(before) :]
    [resumed, *_] = [m for m in after if isinstance(m, Recovered)]
    assert resumed.checkpoint == restore_point
    started = [m.checkpoint for m in after if isinstance(m, Initiated)]
    assert started, "\n".join(said)
    # The restarted worker's clock starts at the largest id the topic names.
    assert min(started) > largest
    assert started == sorted(set(started))


def requesting(bootstrap: str, tmp_path: Path, **extra: str) -> tuple[RunningJob, dict[str, str]]:
    src, dst = unique_name("ask-in"), unique_name("ask-out")
    Admin(bootstrap).create_topics({src: 1, dst: 1})
    params = {"input": src, "output": dst, "name": unique_name("ask"), **extra}
    runner = Runner(
        RunConfig(
            JobRef(f"{Path(requesting_job.__file__)}:job", params),
            bootstrap,
            1,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=COORDINATOR_OFF_S, timeout=60.0),
        ),
        requesting_job.job(params),
        say=lambda _: None,
    )
    runner.prepare()
    return runner.start(), params


def test_a_snapshot_requested_in_the_source_stage_completes_and_commits_the_output(
    bootstrap: str, tmp_path: Path
) -> None:
    runner, params = requesting(bootstrap, tmp_path)
    try:
        produce(bootstrap, params["input"], [(None, b"a b"), (None, b"a")])
        produce(bootstrap, params["input"], [(None, requesting_job.ASK.encode())])
        run_until_completed(runner, 1)
    finally:
        runner.stop()
    control = read_messages(bootstrap, params["name"])
    [initiated] = [m for m in control if isinstance(m, Initiated)]
    assert initiated.task == "s0-0"
    assert [m.checkpoint for m in control if isinstance(m, Completed)] == [initiated.checkpoint]
    # The only checkpoint, so its commit is what a read_committed reader sees:
    # everything up to the request.
    wait_settled(bootstrap, params["output"])
    got = sorted((r.key, r.value) for r in read_all(bootstrap, params["output"]))
    assert got == [(b"a", b"1"), (b"a", b"2"), (b"b", b"1"), (b"snapshot", b"1")]


def step_until_it_fails(runner: RunningJob, deadline: float) -> None:
    while time.monotonic() < deadline:
        runner.step()


def test_a_snapshot_requested_outside_a_source_stage_fails_the_job_with_one_line(
    bootstrap: str, tmp_path: Path
) -> None:
    runner, params = requesting(bootstrap, tmp_path, misplaced="1")
    try:
        produce(bootstrap, params["input"], [(None, requesting_job.ASK.encode())])
        with pytest.raises(JobFailedError, match="outside a source's stage") as failed:
            step_until_it_fails(runner, deadline=time.monotonic() + 120)
        assert "\n" not in str(failed.value)
    finally:
        runner.stop()
