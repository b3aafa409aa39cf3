"""The word count into an Iceberg table on real worker processes, with real SIGKILLs
at every point of the two-phase commit, and a worker stopped past its liveness timeout.

The table is read with pyiceberg, independently of the sink, and compared with the
truth computed from the input: every (word, n) for n in 1..count(word) exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from iceberg_tables import make_catalog, make_table
from pyiceberg.catalog import load_catalog
from sink_wordcount import (
    FAULT_AT,
    POINTS,
    Zombie,
    assert_every_update_once,
    assert_refusals_are_dead_letters,
    run_sink_wordcount,
)

from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.iceberg]

JOB = f"{Path(__file__).with_name('wordcount_job.py')}:job"


def run_wordcount(
    bootstrap: str,
    tmp_path: Path,
    *,
    lines: int,
    seed: int,
    worker_env: dict[str, str] | None = None,
    liveness_timeout: float = 15.0,
    chaos: Callable[[RunningJob], None] | None = None,
    text: str = "",
) -> tuple[Counter[str], dict[str, str], str, Runner, list[str]]:
    """The word count (`sink_wordcount.run_sink_wordcount`) into a new table of a new
    catalog; the truth (word -> count), the catalog, the table and the runner. The
    counts of the words in `text` (comma-separated) are written as text."""
    run = unique_name("icewc")
    table = f"db.{run.replace('-', '_')}"
    props = make_catalog(tmp_path / "iceberg")
    make_table(props, table)
    params = {
        "input": f"{run}-in",
        "catalog": props["uri"],
        "warehouse": props["warehouse"],
        "table": table,
        "name": run,
        "text": text,
    }
    truth, runner, messages = run_sink_wordcount(
        bootstrap, tmp_path, JOB, params, lines=lines, seed=seed,
        worker_env=worker_env, liveness_timeout=liveness_timeout, chaos=chaos,
    )  # fmt: skip
    return truth, props, table, runner, messages


def table_rows(props: dict[str, str], table: str) -> Counter[tuple[str, int]]:
    """The table's rows, read with pyiceberg through a catalog object of its own."""
    data = load_catalog("default", **props).load_table(table).scan().to_arrow()
    words, counts = data.column("word").to_pylist(), data.column("count").to_pylist()
    return Counter(zip(words, counts, strict=True))


@pytest.mark.parametrize("point", POINTS)
def test_every_update_lands_once_with_a_worker_killed_at_a_2pc_point(
    bootstrap: str, tmp_path: Path, point: str
) -> None:
    truth, props, table, runner, messages = run_wordcount(
        bootstrap, tmp_path, lines=1_500, seed=POINTS.index(point),
        worker_env={"KSTREAM_FAULT": f"{point}@{FAULT_AT}"},
    )  # fmt: skip
    log = "\n".join(messages)
    assert runner.stats.recoveries >= 1, log  # the armed point killed a worker
    assert_every_update_once(table_rows(props, table), truth, log)


def test_a_worker_stopped_past_its_liveness_timeout_commits_nothing_when_it_wakes(
    bootstrap: str, tmp_path: Path
) -> None:
    """SIGSTOP one worker mid-run (it may hold pre-committed files and a completed
    checkpoint's commit to do); the job rolls back without it; SIGCONT it after the
    rollback: whatever it tries as a zombie must not land twice or at all."""
    with Zombie(liveness_timeout=4.0).released() as zombie:
        truth, props, table, runner, messages = run_wordcount(
            bootstrap, tmp_path, lines=2_000, seed=3,
            liveness_timeout=zombie.liveness_timeout, chaos=zombie,
        )  # fmt: skip
    log = "\n".join(messages)
    assert zombie.stopped, log
    assert zombie.resumed, log
    assert runner.stats.recoveries >= 1, log
    assert_every_update_once(table_rows(props, table), truth, log)


def test_values_the_table_refuses_are_dead_letters_with_arrows_message_and_the_rest_exact(
    bootstrap: str, tmp_path: Path
) -> None:
    """The counts of w10..w19 come out as text, which the table's long column
    refuses when the epoch's file is written: each of their updates is a dead
    letter with Arrow's message in one line, every other update a row, once."""
    refused = [f"w{i}" for i in range(10, 20)]
    truth, props, table, runner, messages = run_wordcount(
        bootstrap, tmp_path, lines=800, seed=11, text=",".join(refused),
    )  # fmt: skip
    log = "\n".join(messages)
    written = Counter({w: c for w, c in truth.items() if w not in refused})
    assert_every_update_once(table_rows(props, table), written, log)
    assert_refusals_are_dead_letters(
        bootstrap,
        runner,
        refused,
        truth,
        log,
        prefix=f"RecordRefusedError: {table}",
        column="count (int64)",
    )
