"""Results of event-time jobs carry their event time as Kafka timestamp: the
broker's time retention must not delete the results of old input.

`--create-topics` gives such output topics ``retention.ms=-1`` (and says so);
the results of input stamped in 1970 are still there after a retention check
of the broker (one is seen to have run: a canary topic's record is deleted).
A run whose existing output topic would delete them warns once at start-up.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from kstream.dataflow.operators.windows import Tumbling
from kstream.examples import references, windowed_counts
from kstream.examples.event_time import encode
from kstream.examples.references import Record
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import control_topic
from kstream.runtime.config import JobRef, RunConfig, StartOptions
from kstream.runtime.control import read_history
from kstream.runtime.runner.runner import Runner
from kstream.testing import produce, read_all, run_until_consumed, unique_name, wait_settled

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

PARTITIONS = 2
#: 1970-01-01 00:16:40 UTC: input of a job on old data.
T0_MS = 1_000_000
SIZE_MS = 2_000
OOO_MS = 1_000
#: The broker's check may be minutes apart (log.retention.check.interval.ms).
RETENTION_CHECK_DEADLINE_S = 420.0


def records(t0: int) -> list[Record]:
    """Keys a and b over five windows from `t0`, on both partitions, in order, and a
    last record per partition far enough ahead to fire every window."""
    out: list[Record] = [
        (i % PARTITIONS, t0 + i * 250, "ab"[i // PARTITIONS % 2], "x") for i in range(40)
    ]
    return out + [(p, t0 + 60_000, "~pad", "pad") for p in range(PARTITIONS)]


def write(bootstrap: str, topic: str, rows: list[Record]) -> dict[int, int]:
    by_partition: dict[int, list[tuple[bytes, bytes]]] = defaultdict(list)
    for record in rows:
        by_partition[record[0]].append(encode(record))
    for partition, encoded in by_partition.items():
        produce(bootstrap, topic, encoded, partition=partition)
    return {p: len(encoded) for p, encoded in by_partition.items()}


def results(bootstrap: str, topic: str) -> list[tuple[dict[str, Any], int]]:
    """Each real result (not the pad key's) with its Kafka timestamp."""
    got = [(json.loads(r.value or b"null"), r.timestamp) for r in read_all(bootstrap, topic)]
    return [(v, ts) for v, ts in got if v["key"] != "~pad"]


def retention_check_ran(bootstrap: str) -> None:
    """Return once the broker ran a time-retention check after this call: a record
    written now to a topic keeping records for 1 ms is gone."""
    canary = unique_name("retention-canary")
    admin = Admin(bootstrap)
    admin.create_topics({canary: 1}, {"retention.ms": "1"})
    try:
        produce(bootstrap, canary, [(None, b"canary")])
        deadline = time.monotonic() + RETENTION_CHECK_DEADLINE_S
        while admin.watermarks(canary)[0][0] == 0:
            assert time.monotonic() < deadline, "no retention check of the broker ran"
            time.sleep(1.0)  # polling the log start: the broker announces no check
    finally:
        admin.delete_topics([canary])


def test_results_of_1970_input_outlive_retention_in_topics_create_topics_made(
    bootstrap: str, tmp_path: Path
) -> None:
    run = unique_name("et-keep")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: PARTITIONS})
    rows = records(T0_MS)
    ends = write(bootstrap, src, rows)
    params = {"input": src, "output": dst, "name": f"k-{run}", "ooo": str(OOO_MS)}
    params["size"] = str(SIZE_MS)
    messages: list[str] = []
    runner = Runner(
        RunConfig(
            JobRef("kstream.examples.windowed_counts:job", params),
            bootstrap,
            1,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
            start=StartOptions(create_topics=True),
        ),
        windowed_counts.job(params),
        say=messages.append,
    )
    runner.prepare()
    run_until_consumed(runner, src, ends, timeout=300)
    wait_settled(bootstrap, dst)
    expected = references.windowed_counts(rows, Tumbling(SIZE_MS), OOO_MS).results
    expected = {kw: n for kw, n in expected.items() if kw[0] != "~pad"}
    before = results(bootstrap, dst)
    assert references.final_results(v for v, _ in before) == expected
    # A result carries its window's end as event time, hence as Kafka timestamp.
    assert all(ts == v["end"] for v, ts in before), before

    retention_check_ran(bootstrap)
    assert results(bootstrap, dst) == before
    admin = Admin(bootstrap)
    assert admin.topic_config([dst, f"{dst}-late"], "retention.ms") == {
        dst: "-1",
        f"{dst}-late": "-1",
    }
    said = [m for m in messages if m.startswith("created output topic")]
    assert said == [
        f"created output topic {t} ({PARTITIONS} partitions, replication 1, like input {src}; "
        "retention.ms=-1: its records carry their event time as timestamp, which time "
        "retention would judge)"
        for t in (dst, f"{dst}-late")
    ]
    assert not any(m.startswith("WARNING") for m in messages), messages


def start_and_stop(bootstrap: str, tmp_path: Path, src: str, dst: str, name: str) -> str:
    """`kstream run` of the windowed counts until it started, then SIGTERM: its stdout."""
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "kstream", "run", "kstream.examples.windowed_counts:job",
            "-p", f"input={src}", "-p", f"output={dst}", "-p", f"name={name}",
            "--bootstrap-servers", bootstrap, "--workers", "1",
            "--state-dir", str(tmp_path / name),
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        admin = Admin(bootstrap)
        while not (
            admin.partitions(control_topic(name)) is not None
            and any(m["type"] == "recover" for m in read_history(bootstrap, name))
        ):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "kstream run did not start"
            time.sleep(0.2)  # polling the control topic for the run's first message
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    return out + err


def test_a_run_warns_once_when_an_output_topics_retention_would_delete_its_results(
    bootstrap: str, tmp_path: Path
) -> None:
    run = unique_name("et-warn")
    old, recent, dst = f"{run}-old", f"{run}-recent", f"{run}-out"
    admin = Admin(bootstrap)
    admin.create_topics({old: PARTITIONS, recent: PARTITIONS})
    week = "604800000"
    admin.create_topics({dst: PARTITIONS, f"{dst}-late": PARTITIONS}, {"retention.ms": week})
    write(bootstrap, old, records(T0_MS))
    now = time.time_ns() // 1_000_000 // SIZE_MS * SIZE_MS
    write(bootstrap, recent, records(now - 3_600_000))

    console = start_and_stop(bootstrap, tmp_path, old, dst, f"w-{run}")
    warnings = [line for line in console.splitlines() if "WARNING" in line]
    assert warnings == [
        f"kstream: WARNING: output topics {dst}, {dst}-late keep records for retention.ms={week} "
        f"(7 days), but input {old} has event time from 1970-01-01 00:16:40 UTC: results "
        "carry their event time as Kafka timestamp, so the broker's retention will delete "
        "them soon after they are written; set retention.ms=-1 (or longer) on them"
    ], console
    # Input of an hour ago: its results outlive a week's retention, nothing to say.
    console = start_and_stop(bootstrap, tmp_path, recent, dst, f"r-{run}")
    assert "WARNING" not in console, console
