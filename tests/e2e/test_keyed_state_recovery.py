"""Named keyed state (map, list, reducing) on real worker processes, across random
worker SIGKILLs: the read_committed output equals a pure reference, record for record."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import dead_letter_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import Feeder, read_all, run_until_consumed, unique_name, wait_settled

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PARTITIONS = 3
LINES = 6_000
JOB_FILE = Path(__file__).with_name("keyed_state_job.py")
EVENTS = ["view", "click", "purchase", "scroll", "share", "bookmark-added"]


def user_lines(n: int, seed: int) -> list[str]:
    """Line i belongs to a user u with u % PARTITIONS == i % PARTITIONS.

    The feeder writes line i to partition i % PARTITIONS, so each user's lines
    are in one partition, in order: the order the job must see them in.
    """
    rnd = random.Random(seed)
    return [
        f"u{PARTITIONS * rnd.randrange(12) + i % PARTITIONS} {rnd.choice(EVENTS)}" for i in range(n)
    ]


def test_map_list_and_reducing_state_are_exactly_once_across_worker_kills(
    bootstrap: str, tmp_path: Path
) -> None:
    from keyed_state_job import job, reference

    run = unique_name("keyed-state")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: PARTITIONS, dst: PARTITIONS})
    lines = user_lines(LINES, seed=7)
    # Fed at a rate while the job runs, so the kills hit work in flight.
    feeder = Feeder(bootstrap, src, [s.encode() for s in lines], PARTITIONS, rate=400.0)
    params = {"input": src, "output": dst, "name": f"ks-{run}"}
    runner = Runner(
        RunConfig(
            JobRef(f"{JOB_FILE}:job", params),
            bootstrap,
            2,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
        ),
        job(params),
        say=lambda _: None,
    )
    runner.prepare()
    messages: list[str] = []
    kills = run_until_consumed(
        runner,
        src,
        feeder.ends,
        kills=2,
        seed=3,
        say=messages.append,
        chaos=lambda _: feeder.feed(),
        timeout=500,
    )
    assert kills == 2, messages
    wait_settled(bootstrap, dst)
    got: dict[str, list[object]] = {}
    for r in read_all(bootstrap, dst):  # read_committed, in (partition, offset) order
        got.setdefault((r.key or b"").decode(), []).append(json.loads(r.value or b"null"))
    expected = reference(lines)
    assert sorted(got) == sorted(expected)
    for user, summaries in expected.items():
        assert got[user] == summaries, user
    assert read_all(bootstrap, dead_letter_topic(params["name"])) == []
