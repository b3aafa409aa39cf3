"""`read_state(kind="window")` on a savepoint of a real windowed count: its open
windows are the reference's.

`kstream.examples.windowed_counts` (sliding windows, no allowed lateness) runs
as `kstream run` with 2 workers over generated event-time input (out of order,
with too-late records). The input ends with one pad record at the same event
time on every partition, later than every other record: once the job has
read it everywhere, its watermark is exactly ``W = pad time - out-of-orderness``
and goes no further. The pad time is chosen so that W is a window end, and the
job is stopped with a savepoint once the reference's windows ending at or
before W are in the output (read_committed): those fired and were cleaned up,
and the watermark reached W, so every record was read (the pads are the last
records and the latest ones).

The windows read back (key, start, end, contents, emitted) must then be the
slices of one slide that a window ending after W still holds, each with its
count (a sliding count with no allowed lateness keeps slices, and a counting
slice's contents are its accumulator: the count), none marked emitted; and
the operator's timers must be the ends of the reference's windows ending
after W (the result timer and, with no allowed lateness, the cleanup timer
are one).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from job_runs import run_cli, stop_with_savepoint, wait_running
from state_spark import spark as spark  # the module's Spark session (a fixture)
from test_event_time_examples import (
    PARTITIONS,
    late_set,
    outputs,
    real,
    ref_late,
    shifted,
    write,
)

from kstream import tumbling
from kstream.examples import inputs, references, windowed_counts
from kstream.infra.admin import Admin
from kstream.protocol.names import dead_letter_topic
from kstream.testing import read_all, unique_name
from kstream.tools.state import read_state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.audit]

PAD = "~pad"
#: The job's out-of-orderness bound, tighter than the input's disorder (1 s):
#: many records are too late.
OOO_MS = 300
SIZE_MS, SLIDE_MS = 10_000, 2_000
#: Longer than the test: no partition is ever taken for idle while the job
#: catches up, so the watermark is the minimum over all of them, as in the reference.
IDLE_MS = 600_000


def test_open_windows_read_from_a_savepoint_are_the_references(
    bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    run = unique_name("state-windows")
    src, dst, late = f"{run}-in", f"{run}-out", f"{run}-late"
    Admin(bootstrap).create_topics({src: PARTITIONS, dst: PARTITIONS, late: PARTITIONS})
    records = shifted(inputs.keyed_events(5, partitions=PARTITIONS))
    # The first window end W with W + OOO_MS later than every record: the pads at
    # W + OOO_MS are every partition's latest record, so the watermark ends at W.
    newest = max(ts for _, ts, _, _ in records)
    watermark = -(-(newest + 1 - OOO_MS) // SLIDE_MS) * SLIDE_MS
    pads = [(p, watermark + OOO_MS, PAD, "pad") for p in range(PARTITIONS)]
    write(bootstrap, src, records + pads)
    params = {
        "input": src, "output": dst, "late": late, "name": run, "window": "sliding",
        "size": str(SIZE_MS), "slide": str(SLIDE_MS), "lateness": "0",
        "ooo": str(OOO_MS), "idle": str(IDLE_MS),
    }  # fmt: skip
    ref = references.windowed_counts(
        records + pads, windowed_counts.assigner(params), OOO_MS, allowed_lateness=0
    )
    assert ref.watermark == watermark
    fired = ref.certainly_fired()
    still_open = {kw: n for kw, n in ref.results.items() if kw not in fired}
    # The input makes the test: windows that fire exactly at W, and open windows
    # of real keys (not only the pads') holding records.
    assert any(w.end == watermark for _, w in fired)
    assert any(k != PAD for k, _ in still_open)

    def all_fired() -> bool:
        # What is committed so far (`outputs` would wait for the job's writers to stop).
        got = [json.loads(r.value or b"null") for r in read_all(bootstrap, dst)]
        return references.final_results(real(got)) == fired

    job = run_cli(
        bootstrap, "kstream.examples.windowed_counts:job", params,
        name=run, workers=2, state=tmp_path / "state",
    )  # fmt: skip
    wait_running(job, all_fired, "the windows ending at or before W to be emitted")
    url = stop_with_savepoint(bootstrap, run, job)

    got = real(outputs(bootstrap, dst))
    assert not any(o["update"] for o in got)
    assert len(got) == len(fired), "a window fired twice, or one after W"
    assert late_set(outputs(bootstrap, late)) == ref_late(ref.late)
    assert read_all(bootstrap, dead_letter_topic(run)) == []

    # A sliding count with no allowed lateness keeps its windows as slices of one
    # slide (`window._sliced_functions`): the slices still in a window to come.
    slices = references.windowed_counts(records + pads, tumbling(SLIDE_MS), OOO_MS, 0)
    open_slices = {kw: n for kw, n in slices.results.items() if kw[1].start + SIZE_MS > watermark}
    windows = read_state(spark, url, "window", kind="window", value_type="bigint").collect()
    assert {(r.key, r.start, r.end): r.value for r in windows} == {
        (k, w.start, w.end): n for (k, w), n in open_slices.items()
    }
    assert len(windows) == len(open_slices)  # one row per (key, slice)
    assert not any(r.emitted for r in windows)
    timers = read_state(spark, url, "window", kind="timer").collect()
    assert Counter((r.key, r.domain, r.timestamp) for r in timers) == Counter(
        {(k, "event", end): 1 for k, end in {(k, w.end) for k, w in still_open}}
    )
