"""Event time and timers on real worker processes: bucket sums emitted by
event-time timers are exactly the pure reference's across random worker SIGKILLs,
with input out of order within the bound and one partition idle for the rest of
the run (only idleness lets the watermark pass it); records without a usable
timestamp are dead letters with the reason; the watermark never moves back,
judged from the outputs."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import ERROR_HEADER, dead_letter_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
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
#: The timer each key registers with its first record (after every real bucket,
#: before the watermark the padding brings).
FINAL_MS = 30_500


def now_bucket() -> int:
    """Event time starts now (a bucket boundary): the sink writes event time as the
    Kafka timestamp, and the broker's retention deletes records stamped in 1970."""
    return time.time_ns() // 1_000_000 // 1000 * 1000  # event_time_job.BUCKET


def fed_lines(seed: int, t0: int) -> tuple[list[str], list[str]]:
    """Lines for partitions 0 and 1 (alternating, as the feeder writes them), and
    for partition 2. Partitions 0 and 1 advance in lock-step, so neither is ever
    behind the other's watermark, even if one was briefly thought idle."""
    rnd = random.Random(seed)
    fed = []
    for i in range(FED * 2):
        at = t0 + (i // 2) * STEP_MS + rnd.randrange(JITTER_MS)
        fed.append(f"{rnd.choice(KEYS)} {at} {rnd.randrange(100)}")
    end = t0 + (FED - 1) * STEP_MS + PAD_AHEAD_MS
    fed += [f"~pad {end} 0"] * (PAD * 2)
    silent = [
        f"{rnd.choice(KEYS)} {t0 + i * STEP_MS + rnd.randrange(JITTER_MS)} {rnd.randrange(100)}"
        for i in range(SILENT)
    ]
    return fed, silent


def outputs(bootstrap: str, topic: str) -> dict[str, list[dict[str, Any]]]:
    """Each key's outputs in order, each with its Kafka timestamp as ``"kafka_ts"``."""
    got: dict[str, list[dict[str, Any]]] = {}
    for r in read_all(bootstrap, topic):  # read_committed, in (partition, offset) order
        out = json.loads(r.value or b"null")
        out["kafka_ts"] = r.timestamp
        got.setdefault((r.key or b"").decode(), []).append(out)
    return got


def run_to_end(
    bootstrap: str,
    tmp_path: Path,
    params: dict[str, str],
    src: str,
    ends: dict[int, int],
    *,
    say: Callable[[str], None],
) -> None:
    """Run the event-time job on one worker until it has consumed `ends` of `src`."""
    from event_time_job import job

    runner = Runner(
        RunConfig(
            JobRef(f"{JOB_FILE}:job", params),
            bootstrap,
            1,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
        ),
        job(params),
        say=say,
    )
    runner.prepare()
    run_until_consumed(runner, src, ends, timeout=300)


def test_timer_sums_are_exactly_once_across_worker_kills_with_an_idle_partition(
    bootstrap: str, tmp_path: Path
) -> None:
    from event_time_job import job, reference, stamps

    run = unique_name("event-time")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: 3, dst: 3})
    t0 = now_bucket()
    final = t0 + FINAL_MS
    fed, silent = fed_lines(seed=11, t0=t0)
    produce(bootstrap, src, [(None, s.encode()) for s in silent], partition=2)
    feeder = Feeder(bootstrap, src, [s.encode() for s in fed], 2, rate=400.0)
    params = {"input": src, "output": dst, "name": f"et-{run}", "final": str(final)}
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
    # Fed from a thread, steadily: a feed stalled while the supervisor handles a
    # kill would silence partitions 0 and 1 long enough to count as idle, and a
    # partition resuming behind the watermark is the one case §10 leaves open.
    done = threading.Event()

    def feed() -> None:
        while not done.wait(0.01):
            feeder.feed()

    feeding = threading.Thread(target=feed, daemon=True)
    feeding.start()
    try:
        kills = run_until_consumed(
            runner,
            src,
            {**feeder.ends, 2: SILENT},
            kills=2,
            seed=5,
            say=messages.append,
            timeout=500,
        )
    finally:
        done.set()
        feeding.join()
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
    # Outputs are written with their event time: a record's own, a timer's time.
    for outs in got.values():
        for o in outs:
            assert o["kafka_ts"] == o.get("seen", o.get("t", final)), o
    # The timer each key registered once, with its first record, fired once.
    finals = [(k, o["final"]) for k in KEYS for o in got.get(k, []) if "final" in o]
    counts = [line.split()[0] for line in lines]
    assert finals == [(k, counts.count(k)) for k in KEYS]
    # Every record once, under a watermark that never moved back (per key, in order).
    for key, outs in got.items():
        marks = [o["wm"] for o in outs]
        assert marks == sorted(marks), key
        assert all(o["wm"] >= o["t"] for o in outs if "t" in o), key
    # Every record once, stamped as its partition's history alone says (the
    # partitions' watermarks were restored, not rebuilt from the replay).
    seen = sorted(
        (k, o["seen"], o["stamp"]) for k, outs in got.items() for o in outs if "seen" in o
    )
    partitions = [fed[0::2], fed[1::2], silent]
    assert seen == sorted(
        (line.split()[0], int(line.split()[1]), stamp)
        for lines_of_p in partitions
        for line, stamp in zip(lines_of_p, stamps(lines_of_p, 3000), strict=True)
    )
    assert read_all(bootstrap, dead_letter_topic(params["name"])) == []


def test_records_without_a_usable_timestamp_are_dead_letters_and_move_no_watermark(
    bootstrap: str, tmp_path: Path
) -> None:
    run = unique_name("event-time-bad")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: 1, dst: 1})
    t0 = now_bucket()
    far = t0 + 2 * 86_400_000
    lines = [
        f"a {t0 + 100} 1",
        f"a {far} 7",  # more than a day ahead of the partition's watermark
        f"a {t0 + 200} 2",
        "a soon 5",  # no timestamp at all
        f"a {t0 + 300}.5 6",  # a float: an int is required
        f"a {t0 + 900} 4",
        f"a {t0 + 5000} 0",  # moves the watermark past the first bucket (1 s of disorder)
    ]
    produce(bootstrap, src, [(None, s.encode()) for s in lines])
    params = {"input": src, "output": dst, "name": f"etb-{run}", "ooo": "1000"}
    run_to_end(bootstrap, tmp_path, params, src, {0: len(lines)}, say=lambda _: None)
    wait_settled(bootstrap, dst)
    letters = read_all(bootstrap, dead_letter_topic(params["name"]))
    assert [r.value for r in letters] == [
        f"a {far} 7".encode(),
        b"a soon 5",
        f"a {t0 + 300}.5 6".encode(),
    ]
    reasons = [dict(r.headers)[ERROR_HEADER].decode() for r in letters]
    assert reasons[0].startswith(f"TimestampError: timestamp {far} is more than")
    assert reasons[1] == (
        "TimestampError: no usable timestamp: 'soon': timestamps= must return an int of "
        "milliseconds"
    )
    assert reasons[2] == (
        f"TimestampError: no usable timestamp: {t0 + 300}.5 is a float: timestamps= must "
        "return an int of milliseconds (e.g. int(ms))"
    )
    fired = [o for o in outputs(bootstrap, dst)["a"] if "t" in o]
    # The far-future record neither jumped the watermark (the first bucket fired
    # once, complete) nor counted.
    assert [(o["t"], o["sum"]) for o in fired] == [(t0 + 1000, 7)]


#: The first millisecond of the year 3000.
YEAR_3000_MS = 32_503_680_000_000


def test_a_far_future_first_record_is_a_dead_letter_and_windows_still_fire(
    bootstrap: str, tmp_path: Path
) -> None:
    """A partition's first record has no watermark to be judged against: the wall
    clock judges it, so a year-3000 one does not hold the partition's watermark in
    the year 3000 (which made every later record late and no timer fire)."""

    run = unique_name("event-time-first")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: 2, dst: 1})
    t0 = now_bucket()
    # Partition 0 starts in the year 3000; partition 1 is ordinary.
    first = [f"a {YEAR_3000_MS} 9", f"a {t0 + 100} 1", f"a {t0 + 200} 2", f"a {t0 + 5000} 0"]
    other = [f"b {t0 + 300} 4", f"b {t0 + 5000} 0"]
    produce(bootstrap, src, [(None, s.encode()) for s in first], partition=0)
    produce(bootstrap, src, [(None, s.encode()) for s in other], partition=1)
    params = {"input": src, "output": dst, "name": f"etf-{run}", "ooo": "1000"}
    messages: list[str] = []
    run_to_end(
        bootstrap, tmp_path, params, src, {0: len(first), 1: len(other)}, say=messages.append
    )
    wait_settled(bootstrap, dst)
    got = outputs(bootstrap, dst)
    # Partition 0's later records are on time at their partition (a window would
    # have taken them), not behind a watermark in the year 3000.
    stamps = [(o["seen"], o["stamp"]) for o in got["a"] if "seen" in o]
    assert [seen for seen, _ in stamps] == [t0 + 100, t0 + 200, t0 + 5000]
    assert all(stamp <= seen for seen, stamp in stamps), stamps
    letters = read_all(bootstrap, dead_letter_topic(params["name"]))
    assert [r.value for r in letters] == [f"a {YEAR_3000_MS} 9".encode()]
    reason = dict(letters[0].headers)[ERROR_HEADER].decode()
    assert reason.startswith(
        f"TimestampError: timestamp {YEAR_3000_MS} of partition 0's first record is more "
        "than 86400000 ms ahead of the wall clock"
    ), reason
    # The console said so.
    notices = [m for m in messages if m.startswith("dead letter") and str(YEAR_3000_MS) in m]
    assert notices, messages
    # Both keys' first buckets fired once, complete, without the year-3000 record.
    assert [(o["t"], o["sum"]) for o in got["a"] if "t" in o] == [(t0 + 1000, 3)]
    assert [(o["t"], o["sum"]) for o in got["b"] if "t" in o] == [(t0 + 1000, 4)]


def test_an_output_further_ahead_than_its_topic_takes_is_a_dead_letter_not_a_rollback_loop(
    bootstrap: str, tmp_path: Path
) -> None:
    """A record two hours ahead is within `max_future_ms` (a day), but the output
    topic takes timestamps at most an hour ahead of the broker's clock (Kafka 4's
    default): its output used to fail the epoch's transaction at every replay."""

    run = unique_name("event-time-ahead")
    src, dst = f"{run}-in", f"{run}-out"
    admin = Admin(bootstrap)
    admin.create_topics({src: 1})
    admin.create_topics({dst: 1}, {"message.timestamp.after.max.ms": "3600000"})
    t0 = now_bucket()
    ahead = t0 + 2 * 3_600_000
    lines = [f"a {t0 + 100} 1", f"a {ahead} 9", f"a {t0 + 200} 2", f"a {t0 + 5000} 0"]
    produce(bootstrap, src, [(None, s.encode()) for s in lines])
    params = {"input": src, "output": dst, "name": f"eta-{run}", "ooo": "1000"}
    messages: list[str] = []
    run_to_end(bootstrap, tmp_path, params, src, {0: len(lines)}, say=messages.append)
    wait_settled(bootstrap, dst)
    assert not [m for m in messages if m.startswith("recovery")], messages
    got = outputs(bootstrap, dst)
    assert [o["seen"] for o in got["a"] if "seen" in o] == [t0 + 100, t0 + 200, t0 + 5000]
    letters = read_all(bootstrap, dead_letter_topic(params["name"]))
    assert len(letters) == 1
    reason = dict(letters[0].headers)[ERROR_HEADER].decode()
    assert reason.startswith(
        f"TimestampError: output event time {ahead} is more than 3600000 ms ahead of the wall clock"
    ), reason
