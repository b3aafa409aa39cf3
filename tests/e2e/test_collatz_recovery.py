"""A job with a loop (the Collatz example) on real worker processes, with real SIGKILLs.

Numbers are fed while the job runs; each loops through the head and the body
(two channels, one of them the loop channel) until it reaches 1. Workers are
SIGKILLed at random and at every named fault point of the protocol (the
`recording` point hits a loop head whose loop channel is being logged). The
output, read with read_committed, must be exactly the plain loop's: every
start once, with its step count, none missing. Whether a restore here replays
a non-empty loop range depends on timing;
`tests/integration/test_loop_channel_state.py` makes one for certain.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from kstream.examples.collatz import job, reference
from kstream.infra.admin import Admin
from kstream.protocol.barrier import Alignment
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.flow import FlowConfig
from kstream.protocol.input import HOLD_BYTES
from kstream.protocol.names import dead_letter_topic
from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.runtime.worker.faults import POINTS
from kstream.testing import Feeder, read_all, run_until_consumed, unique_name, wait_settled

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: Starts drawn from 1..MAX_START (27 takes 111 steps; below 3,000 at most 216).
MAX_START = 3_000
#: The named fault fires on this checkpoint id: the coordinator's third.
FAULT_AT = SnapshotId(3, COORDINATOR).encode()


def run_collatz(
    bootstrap: str,
    tmp_path: Path,
    *,
    numbers: int,
    seed: int,
    kills: int,
    kill_after: int = 1,
    worker_env: dict[str, str] | None = None,
    alignment: Alignment = Alignment.ALIGNED,
    max_channel_lag: int | None = None,
    alignment_hold_bytes: int = HOLD_BYTES,
) -> tuple[list[int], Counter[tuple[str, str]], int, list[str], Runner]:
    """Feed `numbers` distinct starts (and one bad line) and run the job to the end."""
    run = unique_name("collatz")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    starts = random.Random(seed).sample(range(1, MAX_START + 1), numbers)
    lines = [str(n).encode() for n in starts]
    lines.insert(numbers // 2, b"zero")  # not a number: a dead letter, nothing else
    feeder = Feeder(bootstrap, src, lines, 2, rate=400.0)
    params = {"input": src, "output": dst, "name": f"cz-{run}"}
    messages: list[str] = []
    runner = Runner(
        RunConfig(
            JobRef("kstream.examples.collatz:job", params),
            bootstrap,
            2,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.3, timeout=60.0),
            alignment=alignment,
            alignment_hold_bytes=alignment_hold_bytes,
            flow=FlowConfig() if max_channel_lag is None else FlowConfig(max_lag=max_channel_lag),
        ),
        job(params),
        say=messages.append,
        worker_env=worker_env,
    )
    runner.prepare()
    done = run_until_consumed(
        runner,
        src,
        feeder.ends,
        kills=kills,
        kill_after=kill_after,
        seed=seed,
        say=messages.append,
        chaos=lambda _: feeder.feed(),
        timeout=500,
    )
    wait_settled(bootstrap, dst)
    got = Counter(
        ((r.key or b"").decode(), (r.value or b"").decode()) for r in read_all(bootstrap, dst)
    )
    letters = read_all(bootstrap, dead_letter_topic(params["name"]))
    # Dead letters are written at least once: a kill between dead-lettering "zero" and
    # the next completed checkpoint replays it and writes it again (docs/operations/
    # console.md: records are counted when processed). Nothing else may be a dead letter.
    assert {r.value for r in letters} == {b"zero"}, messages
    return starts, got, done, messages, runner


def assert_reference(starts: list[int], got: Counter[tuple[str, str]], log: str) -> None:
    expected = reference(starts)
    duplicates = +(got - expected)
    missing = +(expected - got)
    assert not duplicates, f"duplicated or wrong: {sorted(duplicates)[:10]}\n{log}"
    assert not missing, f"missing: {sorted(missing)[:10]}\n{log}"
    assert got == expected


def test_collatz_is_exactly_once_across_two_random_kills(bootstrap: str, tmp_path: Path) -> None:
    starts, got, kills, messages, runner = run_collatz(
        bootstrap, tmp_path, numbers=1_500, seed=31, kills=2
    )
    log = "\n".join(messages)
    assert kills == 2, log
    assert runner.stats.recoveries >= 2, log
    assert_reference(starts, got, log)


@pytest.mark.parametrize("point", sorted(POINTS))
def test_collatz_is_exactly_once_with_a_worker_killed_at_a_protocol_point(
    bootstrap: str, tmp_path: Path, point: str
) -> None:
    starts, got, _, messages, runner = run_collatz(
        bootstrap,
        tmp_path,
        numbers=600,
        seed=sorted(POINTS).index(point),
        kills=0,
        worker_env={"KSTREAM_FAULT": f"{point}@{FAULT_AT}"},
        # A channel overflows the hold only past its bound: none, so every
        # blocked channel is paused at its barrier.
        alignment_hold_bytes=0 if point == "overflowed" else HOLD_BYTES,
    )
    log = "\n".join(messages)
    # The armed point killed at least one worker (every worker that reached it dies).
    assert runner.stats.recoveries >= 1, log
    assert_reference(starts, got, log)


def test_collatz_under_tight_flow_control_and_unaligned_snapshots_finishes_exactly_once(
    bootstrap: str, tmp_path: Path
) -> None:
    # A bound of 2 channel records pauses the head's forward input constantly;
    # were the loop channel paused or counted, the loop would wait on itself.
    starts, got, _, messages, _ = run_collatz(
        bootstrap,
        tmp_path,
        numbers=600,
        seed=7,
        kills=1,
        alignment=Alignment.UNALIGNED,
        max_channel_lag=2,
    )
    assert_reference(starts, got, "\n".join(messages))
