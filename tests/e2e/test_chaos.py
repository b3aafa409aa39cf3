"""Exactly-once output under chaos: workers SIGKILLed at every named point of the
checkpoint and two-phase-commit protocol and at random times, and the broker
SIGKILLed and restarted. A read_committed checker must see, for every word,
exactly the counts 1..N in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wordcount_runs import assert_exactly_once, run_wordcount

from kstream.infra.broker import LocalBroker
from kstream.protocol.barrier import Alignment
from kstream.protocol.input import HOLD_BYTES
from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId
from kstream.runtime.runner.runner import RunningJob
from kstream.runtime.worker.faults import FAULT_FILE_ENV, POINTS

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: The named fault fires on the coordinator's third checkpoint; random kills
#: start after the third completed checkpoint.
FAULT_AT = SnapshotId(3, COORDINATOR).encode()
#: Coordinator checkpoints from `FAULT_AT` on at which an overflow is armed
#: (until one fires): more than a chaos run takes.
OVERFLOW_ARMED = 1000
KILL_AFTER = 3
#: Input lines per second while the job runs: the faults must hit a job with
#: work in flight, not one that already drained its input.
RATE = 4000.0
#: What every chaos run shares: 40,000 lines fed at `RATE` while the job runs
#: (held while it starts or recovers), one random worker SIGKILL, frequent
#: checkpoints. Held, because the random kill is due after a number of completed
#: checkpoints and the input's end after a span of feeding: fed during the
#: armed point's recovery as well, the input could be covered before the kill
#: was due, and the run would end without it.
CHAOS_RUN: dict[str, Any] = {
    "lines": 40_000,
    "rate": RATE,
    "kills": 1,
    "checkpoint_interval": 0.3,
    "hold_input_while_recovering": True,
}


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_worker_killed_at_a_protocol_point_and_at_random_leaves_output_exactly_once(
    bootstrap: str, point: str
) -> None:
    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        **CHAOS_RUN,
        seed=sorted(POINTS).index(point),
        kill_after=KILL_AFTER,
        worker_env={"KSTREAM_FAULT": f"{point}@{FAULT_AT}"},
        # Only an unaligned snapshot records channel state.
        alignment=Alignment.UNALIGNED if point == "recording" else Alignment.ALIGNED,
        # A channel overflows the hold only past its bound: none, so every
        # blocked channel is paused at its barrier.
        alignment_hold_bytes=0 if point == "overflowed" else HOLD_BYTES,
    )
    log = "\n".join(messages)
    assert outcome.kills == 1, log
    # The armed point killed at least one worker (every worker that reached it dies).
    assert outcome.recoveries >= 1 + outcome.kills, log
    assert_exactly_once(outcome)


def test_a_hold_outgrown_after_holding_some_records_stays_exactly_once(
    bootstrap: str, tmp_path: Path
) -> None:
    """A hold of one byte: a blocked channel's barrier is held, and its first record
    after the barrier overflows it, so the channel is paused, its fetched records
    dropped, and read again from that record after the alignment. A worker dies
    at the first overflow from the third checkpoint on (a checkpoint whose blocked
    channels bring nothing before the alignment ends never overflows, so which
    one is not known in advance), and one at random."""
    first = SnapshotId.decode(FAULT_AT).sequence
    # Armed from a file, every coordinator checkpoint from the third on, and
    # disarmed once it fired: a fixed few armed checkpoints could all align
    # without an overflow on a slow machine.
    fault_file = tmp_path / "faults"
    fault_file.write_text(
        "\n".join(
            f"overflowed@{SnapshotId(first + i, COORDINATOR).encode()}"
            for i in range(OVERFLOW_ARMED)
        )
    )
    fired = fault_file.with_name(fault_file.name + ".fired")

    def disarm_once_fired(runner: RunningJob) -> None:
        if fired.exists() and fault_file.exists():
            fault_file.unlink()

    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        **CHAOS_RUN,
        seed=11,
        kill_after=KILL_AFTER,
        worker_env={FAULT_FILE_ENV: str(fault_file)},
        chaos=disarm_once_fired,
        alignment_hold_bytes=1,
    )
    log = "\n".join(messages)
    assert fired.exists(), "no overflow from the third checkpoint on\n" + log
    assert outcome.kills == 1, log
    # The overflow killed at least one worker.
    assert outcome.recoveries >= 1 + outcome.kills, log
    assert_exactly_once(outcome)


def test_a_broker_sigkill_and_restart_leaves_output_exactly_once(
    bootstrap: str, local_broker: LocalBroker | None
) -> None:
    if local_broker is None:
        pytest.skip("the tests run against a cluster they did not start: not ours to kill")
    restarted: list[int] = []

    def restart_broker(runner: RunningJob) -> None:
        # First the random worker kill (after checkpoint 1) and its recovery, then,
        # once the job completes checkpoints again, the broker: both while input flows.
        latest = runner.stats.latest or 0
        if not restarted and runner.stats.recoveries >= 1 and latest >= 3:
            assert local_broker.kill()
            local_broker.start()
            restarted.append(latest)

    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        **{**CHAOS_RUN, "lines": 60_000},
        seed=29,
        kill_after=1,
        chaos=restart_broker,
    )
    assert restarted, "\n".join(messages)
    assert outcome.kills == 1, "\n".join(messages)
    assert_exactly_once(outcome)
