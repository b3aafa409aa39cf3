"""Flow control against a backlog, on real worker processes and a real broker.

The word count starts on an input written beforehand. Without flow control
the source fills the channels with the backlog and every barrier waits behind
what the channels hold; with it, the channels hold at most about
``--max-channel-lag`` records each, so a checkpoint waits only behind that.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from benchmarks.flow_bench import backlog_run, write_backlog
from kstream.runtime.channels.format import MAX_BATCH
from kstream.tools.demo import _generate

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

LINES = 40_000
MAX_LAG = 10
INTERVAL_S = 0.5
#: Channels of the word count with 2 workers: 2 source subtasks x 2 counting subtasks.
CHANNELS = 4
#: A channel may exceed the bound by a partial batch and one input record's
#: records (reads are sized by the room left), and what the test sees is end
#: offsets minus positions readers commit every 100 ms: it also counts what a
#: reader read since its last commit.
OVERSHOOT = 3


def test_checkpoints_complete_while_a_backlog_drains(bootstrap: str) -> None:
    lines = _generate(LINES, seed=3)
    src, ends = write_backlog(bootstrap, lines)
    run = backlog_run(bootstrap, src, ends, lines, max_channel_lag=MAX_LAG, interval=INTERVAL_S)
    assert run.exactly_once
    assert run.recoveries == 0
    # What the channels may hold, in stream records, and how long the counting
    # stage takes for that at the rate it drained the whole backlog: the longest
    # a barrier can wait behind the channels' content. A checkpoint takes that,
    # plus the trigger's wait for the sources' current batch and the acks' trip.
    held_words = MAX_LAG * OVERSHOOT * MAX_BATCH * CHANNELS
    bound_s = held_words / run.words_per_s + 2 * INTERVAL_S
    figures = (
        f"{len(run.durations_s)} checkpoints in {run.seconds:.1f}s at {run.words_per_s:.0f} "
        f"words/s, durations {[round(d, 2) for d in run.durations_s]}, bound {bound_s:.2f}s, "
        f"peak lag {run.peak_lag}"
    )
    # The first checkpoint also waits for every worker to start.
    assert len(run.durations_s) >= 4, figures
    assert max(run.durations_s[1:]) <= bound_s, figures
    assert statistics.median(run.durations_s) <= bound_s, figures
    assert run.peak_lag <= MAX_LAG * OVERSHOOT, figures


def test_a_paused_middle_stage_and_its_aligning_reader_never_wait_for_each_other(
    bootstrap: str,
) -> None:
    """Three stages: the count both aligns (reading) and is paused (writing).

    A reader aligning checkpoint n holds the channels that delivered barrier n
    and reads the others, whose writers have not passed n yet: those channels
    drain, so their writers resume and reach n. A deadlock would show as
    checkpoints that stop completing, and the run as a timeout.
    """
    lines = _generate(LINES // 2, seed=4)
    src, ends = write_backlog(bootstrap, lines)
    spec = f"{Path(__file__).with_name('relay_wordcount_job.py')}:job"
    run = backlog_run(
        bootstrap,
        src,
        ends,
        lines,
        max_channel_lag=MAX_LAG,
        interval=INTERVAL_S,
        spec=spec,
        timeout=300,
    )
    figures = f"{len(run.durations_s)} checkpoints in {run.seconds:.1f}s: {run.durations_s}"
    assert run.exactly_once, figures
    assert run.recoveries == 0, figures
    assert len(run.durations_s) >= 4, figures
    assert run.peak_lag <= MAX_LAG * OVERSHOOT, figures
