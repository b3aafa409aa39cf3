"""Event time and timers on real worker processes: bucket sums emitted by
event-time timers are exactly the pure reference's across random worker SIGKILLs,
with input out of order within the bound and one partition idle for the rest of
the run (only idleness lets the watermark pass it); records without a usable
timestamp are dead letters with the reason; the watermark never moves back,
judged from the outputs."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from kstream.infra.admin import Admin
from kstream.protocol.coordinator import CoordinatorConfig
from kstream.protocol.names import ERROR_HEADER, dead_letter_topic
from kstream.runtime.runner import Runner
from kstream.testing import Feeder, produce, read_all, run_until_consumed, unique_name, wait_settled

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

JOB_FILE = Path(__file__).with_name("event_time_job.py")
KEYS = [f"k{i}" for i in range(8)]
#: Records per fed partition (0 and 1), and of the partition that falls silent (2).
FED = 2_500
SILENT = 300
#: Event time advances this much per record of a partition; jitter stays below
#: the out-of-orderness bound (3 s), so every record is on time.
STEP_MS = 10
JITTER_MS = 2_000
#: Records at the end of partitions 0 and 1 far ahead in event time (key "~pad"),
#: so the watermark passes every bucket of the real keys, once partition 2 is idle.
PAD = 600
PAD_AHEAD_MS = 20_000


def fed_lines(seed: int) -> tuple[list[str], list[str]]:
    """Lines for partitions 0 and 1 (alternating, as the feeder writes them), and
    for partition 2. Partitions 0 and 1 advance in lock-step, so neither is ever
    behind the other's watermark, even if one was briefly thought idle."""
    rnd = random.Random(seed)
    fed = []
    for i in range(FED * 2):
        base = (i // 2) * STEP_MS
        fed.append(f"{rnd.choice(KEYS)} {base + rnd.randrange(JITTER_MS)} {rnd.randrange(100)}")
    end = (FED - 1) * STEP_MS + PAD_AHEAD_MS
    fed += [f"~pad {end} 0"] * (PAD * 2)
    silent = [
        f"{rnd.choice(KEYS)} {i * STEP_MS + rnd.randrange(JITTER_MS)} {rnd.randrange(100)}"
        for i in range(SILENT)
    ]
    return fed, silent


def outputs(bootstrap: str, topic: str) -> dict[str, list[dict[str, Any]]]:
    got: dict[str, list[dict[str, Any]]] = {}
    for r in read_all(bootstrap, topic):  # read_committed, in (partition, offset) order
        got.setdefault((r.key or b"").decode(), []).append(json.loads(r.value or b"null"))
    return got


def test_timer_sums_are_exactly_once_across_worker_kills_with_an_idle_partition(
    bootstrap: str, tmp_path: Path
) -> None:
    from event_time_job import job, reference

    run = unique_name("event-time")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: 3, dst: 3})
    fed, silent = fed_lines(seed=11)
    produce(bootstrap, src, [(None, s.encode()) for s in silent], partition=2)
    feeder = Feeder(bootstrap, src, [s.encode() for s in fed], 2, rate=400.0)
    params = {"input": src, "output": dst, "name": f"et-{run}"}
    runner = Runner(
        job(params),
        spec=f"{JOB_FILE}:job",
        params=params,
        bootstrap=bootstrap,
        workers=2,
        state_dir=tmp_path / "state",
        config=CoordinatorConfig(interval=0.5, timeout=60.0),
        say=lambda _: None,
    )
    runner.prepare()
    messages: list[str] = []
    kills = run_until_consumed(
        runner,
        src,
        {**feeder.ends, 2: SILENT},
        kills=2,
        seed=5,
        say=messages.append,
        chaos=lambda _: feeder.feed(),
        timeout=500,
    )
    assert kills == 2, messages
    wait_settled(bootstrap, dst)
    got = outputs(bootstrap, dst)
    lines = [s for s in fed + silent if not s.startswith("~")]
    expected = reference(lines)
    fired = [(k, o["t"], o["sum"]) for k, outs in got.items() for o in outs if "t" in o]
    real = [(k, t, s) for k, t, s in fired if not k.startswith("~")]
    # Every bucket once (no bucket fired twice, none lost), with the reference's sum.
    assert sorted((k, t) for k, t, _ in real) == sorted(expected)
    assert {(k, t): s for k, t, s in real} == expected
    # Every record once, under a watermark that never moved back (per key, in order).
    for key, outs in got.items():
        marks = [o["wm"] for o in outs]
        assert marks == sorted(marks), key
        assert all(o["wm"] >= o["t"] for o in outs if "t" in o), key
    seen = sorted((k, o["seen"]) for k, outs in got.items() for o in outs if "seen" in o)
    assert seen == sorted((s.split()[0], int(s.split()[1])) for s in fed + silent)
    assert read_all(bootstrap, dead_letter_topic(params["name"])) == []


def test_records_without_a_usable_timestamp_are_dead_letters_and_move_no_watermark(
    bootstrap: str, tmp_path: Path
) -> None:
    from event_time_job import job

    run = unique_name("event-time-bad")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: 1, dst: 1})
    lines = [
        "a 100 1",
        "a 500000000000 7",  # more than a day ahead of the partition's watermark
        "a 200 2",
        "a soon 5",  # no timestamp at all
        "a 900 4",
        "a 5000 0",  # moves the watermark past the first bucket (out-of-orderness 1 s)
    ]
    produce(bootstrap, src, [(None, s.encode()) for s in lines])
    params = {"input": src, "output": dst, "name": f"etb-{run}", "ooo": "1000"}
    runner = Runner(
        job(params),
        spec=f"{JOB_FILE}:job",
        params=params,
        bootstrap=bootstrap,
        workers=1,
        state_dir=tmp_path / "state",
        config=CoordinatorConfig(interval=0.5, timeout=60.0),
        say=lambda _: None,
    )
    runner.prepare()
    run_until_consumed(runner, src, {0: len(lines)}, timeout=300)
    wait_settled(bootstrap, dst)
    letters = read_all(bootstrap, dead_letter_topic(params["name"]))
    assert [r.value for r in letters] == [b"a 500000000000 7", b"a soon 5"]
    reasons = [dict(r.headers)[ERROR_HEADER].decode() for r in letters]
    assert reasons[0].startswith("TimestampError: timestamp 500000000000 is more than")
    assert reasons[1] == "TimestampError: no usable timestamp: 'soon'"
    fired = [o for o in outputs(bootstrap, dst)["a"] if "t" in o]
    # The far-future record neither jumped the watermark (the first bucket fired
    # once, complete) nor counted.
    assert [(o["t"], o["sum"]) for o in fired] == [(1000, 7)]
