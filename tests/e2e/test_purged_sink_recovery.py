"""A sink killed between pre-commit and commit after purges recovers exactly once, on a real broker.

The word count runs with checkpoints every 0.2 s and no control history kept
beyond what a restart needs (`Runner.control_history = 0`). Once many
checkpoints have completed and the purges have moved the log start of every
commit-marker partition and of the control topic forward, a fault point of
the two-phase commit is armed (`KSTREAM_FAULT_FILE`) for a coming checkpoint:
every worker reaching it SIGKILLs itself. Its replacement's sinks find their
newest committed marker in the purged partitions and re-publish exactly the
epochs after it. This happens `ROUNDS` times, each after the log starts moved
again. The whole output, read read_committed, must hold every word's counts
1..N exactly once: a purge that deleted the marker a recovery needs shows up
as an epoch published twice.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from kstream.examples import wordcount
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import commit_topic, control_topic
from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import Feeder, in_flight_at, read_all, unique_name, wait_settled
from kstream.tools.demo import check_running_counts

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PARTITIONS = 2
#: Input is fed in chunks of this many lines at `RATE` lines/s, for as long as
#: faults remain to be injected (an epoch without output writes no marker).
CHUNK = 1_000
RATE = 200.0
#: Faults per run, each after the log starts moved past where they were at the previous.
ROUNDS = 2
#: Checkpoints that must complete before a fault is armed (the first: since the
#: start; the next: since the previous recovery).
MIN_COMPLETED = 12
#: Consecutive coordinator checkpoints armed, from two after the latest completed
#: one: a checkpoint that fails never reaches ``completed-before-commit``.
ARMED = 20
#: How long each phase (purging, the fault firing, the recovery, the drain) may take.
PHASE_DEADLINE_S = 240.0

#: The points between a sink's pre-commit and its commit (`kstream.runtime.worker.faults`).
BETWEEN_PRE_COMMIT_AND_COMMIT = ("pre-committed", "completed-before-commit", "committed")


def log_starts(admin: Admin, topic: str) -> dict[int, int]:
    return {p: low for p, (low, _) in admin.watermarks(topic).items()}


class Input:
    """The job's input, fed in chunks at `RATE` while `more` is set; all lines fed so far."""

    def __init__(self, bootstrap: str, topic: str, seed: int) -> None:
        self._bootstrap = bootstrap
        self._topic = topic
        self._rnd = random.Random(seed)
        self._vocab = [f"w{i:03d}" for i in range(300)]
        self.lines: list[str] = []
        self.ends = dict.fromkeys(range(PARTITIONS), 0)
        self.more = True
        self._chunk: Feeder | None = None
        self._chunk_lines: list[str] = []

    def feed(self) -> None:
        if self._chunk is not None and self._chunk.sent < len(self._chunk_lines):
            self._chunk.feed()
            return
        if not self.more:
            return
        rnd = self._rnd
        self._chunk_lines = [
            " ".join(rnd.choices(self._vocab, k=rnd.randint(3, 9))) for _ in range(CHUNK)
        ]
        self._chunk = Feeder(
            self._bootstrap,
            self._topic,
            [s.encode() for s in self._chunk_lines],
            PARTITIONS,
            rate=RATE,
        )
        self.lines += self._chunk_lines
        for p, end in self._chunk.ends.items():
            self.ends[p] += end
        self._chunk.feed()

    @property
    def done(self) -> bool:
        """Every line of `lines` was written and acknowledged (no chunk being fed)."""
        return self._chunk is None or self._chunk.sent == len(self._chunk_lines)


class Phase:
    """A deadline for one phase of the run, failing with what the run said so far."""

    def __init__(self, what: str, said: list[str]) -> None:
        self.what, self.said = what, said
        self.deadline = time.monotonic() + PHASE_DEADLINE_S

    def check(self) -> None:
        assert time.monotonic() < self.deadline, (
            f"{self.what}: not within {PHASE_DEADLINE_S:.0f}s",
            self.said,
        )


@pytest.mark.parametrize("point", BETWEEN_PRE_COMMIT_AND_COMMIT)
def test_a_sink_killed_between_pre_commit_and_commit_after_purges_recovers_exactly_once(
    bootstrap: str, tmp_path: Path, point: str
) -> None:
    run = unique_name("purged-sink")
    src, dst = f"{run}-in", f"{run}-out"
    admin = Admin(bootstrap)
    admin.create_topics({src: PARTITIONS, dst: PARTITIONS})
    params = {"input": src, "output": dst, "name": f"p-{run}"}
    job = params["name"]
    faults = tmp_path / "faults"
    fired = faults.with_name(faults.name + ".fired")
    said: list[str] = []
    runner = Runner(
        RunConfig(
            JobRef("kstream.examples.wordcount:job", params),
            bootstrap,
            2,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.2, timeout=60.0),
        ),
        wordcount.job(params),
        say=said.append,
        worker_env={"KSTREAM_FAULT_FILE": str(faults)},
    )
    runner.control_history = 0  # purge all a restart does not read
    runner.prepare()
    feed = Input(bootstrap, src, seed=BETWEEN_PRE_COMMIT_AND_COMMIT.index(point))

    def step() -> None:
        running.step()
        if runner.stats.latest is not None:
            # Fed once the workers are up, so that many epochs carry output.
            feed.feed()

    # Where the log starts were when the previous fault fired (0: the topics' start).
    control_was = 0
    markers_were: dict[int, int] = {}
    running = runner.start()
    try:
        for round_ in range(ROUNDS):
            # 1. Many checkpoints complete and both topics' log starts move forward.
            phase = Phase(f"round {round_}: purges", said)
            completed = runner.stats.completed
            checked = 0.0
            while True:
                step()
                now = time.monotonic()
                if runner.stats.completed - completed >= MIN_COMPLETED and now - checked >= 1.0:
                    checked = now  # the broker's log starts, polled
                    control = log_starts(admin, control_topic(job))[0]
                    markers = log_starts(admin, commit_topic(job))
                    if control > control_was and all(
                        low > markers_were.get(p, 0) for p, low in markers.items()
                    ):
                        break
                phase.check()
            said.append(f"round {round_}: log starts control {control}, markers {markers}")
            control_was, markers_were = control, markers

            # 2. Arm the point for the coming coordinator checkpoints; every worker
            #    reaching it dies. Disarmed once it fired, before a replacement runs.
            latest = runner.stats.latest
            assert latest is not None
            first = SnapshotId.decode(latest).sequence + 2
            armed = [SnapshotId(first + i, COORDINATOR).encode() for i in range(ARMED)]
            faults.write_text(",".join(f"{point}@{n}" for n in armed))
            recoveries = runner.stats.recoveries
            phase = Phase(f"round {round_}: {point} firing", said)
            while not (fired.exists() and fired.read_text().strip()):
                step()
                phase.check()
            faults.write_text("")
            shots = fired.read_text().split("\n")
            said.append(f"round {round_}: fired {shots}")
            fired.unlink()
            hit = int(shots[0].split()[0].partition("@")[2])

            # 3. The job recovers and completes a checkpoint after the fault.
            phase = Phase(f"round {round_}: recovery after {point}@{hit}", said)
            while not (runner.stats.recoveries > recoveries and (runner.stats.latest or 0) > hit):
                step()
                phase.check()

        # 4. No more input: run until a checkpoint covers all of it.
        feed.more = False
        phase = Phase("drain", said)
        while not (
            feed.done
            and all(
                runner.stats.source_offsets.get(src, {}).get(p, 0) >= end
                for p, end in feed.ends.items()
            )
            and not in_flight_at(runner, runner.stats.latest)
        ):
            step()
            phase.check()
    finally:
        running.stop()

    assert runner.stats.recoveries >= ROUNDS, said
    wait_settled(bootstrap, dst)
    check = check_running_counts(feed.lines, read_all(bootstrap, dst))
    assert check.output_exact, (check, said)
    assert check.outputs == sum(len(line.split()) for line in feed.lines), (check, said)
