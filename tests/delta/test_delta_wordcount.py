"""The word count into a Delta table on real worker processes, with real SIGKILLs at
every point of the two-phase commit, and a worker stopped past its liveness timeout.

The table is read with deltalake, independently of the sink, and compared with the
truth computed from the input: every (word, n) for n in 1..count(word) exactly once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable
from object_store import Bucket
from sink_wordcount import (
    FAULT_AT,
    POINTS,
    Zombie,
    assert_every_update_once,
    assert_refusals_are_dead_letters,
    run_sink_wordcount,
)

from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId
from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

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
    table: str | None = None,
    workers: int = 2,
    text: str = "",
) -> tuple[Counter[str], str, Runner, list[str]]:
    """The word count (`sink_wordcount.run_sink_wordcount`) into `table` (default:
    a directory of `tmp_path`); the truth (word -> count) and the table's URI. The
    counts of the words in `text` (comma-separated) are written as text."""
    run = unique_name("dlwc")
    table = table or str(tmp_path / "word_counts")
    params = {"input": f"{run}-in", "table": table, "name": run, "text": text}
    if table.startswith("s3://"):
        params["allow_http"] = "true"
    truth, runner, messages = run_sink_wordcount(
        bootstrap, tmp_path, JOB, params, lines=lines, seed=seed, workers=workers,
        worker_env=worker_env, liveness_timeout=liveness_timeout, chaos=chaos,
    )  # fmt: skip
    return truth, table, runner, messages


def table_rows(uri: str) -> Counter[tuple[str, int]]:
    options = {"AWS_ALLOW_HTTP": "true"} if uri.startswith("s3://") else None
    t = DeltaTable(uri, storage_options=options).to_pyarrow_table()
    return Counter(zip(t.column("word").to_pylist(), t.column("count").to_pylist(), strict=True))


@pytest.mark.parametrize("point", POINTS)
def test_every_update_lands_once_with_a_worker_killed_at_a_2pc_point(
    bootstrap: str, tmp_path: Path, point: str
) -> None:
    truth, table, runner, messages = run_wordcount(
        bootstrap, tmp_path, lines=1_500, seed=POINTS.index(point),
        worker_env={"KSTREAM_FAULT": f"{point}@{FAULT_AT}"},
    )  # fmt: skip
    log = "\n".join(messages)
    assert runner.stats.recoveries >= 1, log  # the armed point killed a worker
    assert_every_update_once(table_rows(table), truth, log)


def test_a_worker_stopped_past_its_liveness_timeout_commits_nothing_when_it_wakes(
    bootstrap: str, tmp_path: Path
) -> None:
    """SIGSTOP one worker mid-run (it may hold written, uncommitted epochs); the job
    rolls back without it; SIGCONT it after the rollback: whatever it commits as a
    zombie must not land."""
    with Zombie(liveness_timeout=4.0).released() as zombie:
        truth, table, runner, messages = run_wordcount(
            bootstrap, tmp_path, lines=2_000, seed=3,
            liveness_timeout=zombie.liveness_timeout, chaos=zombie,
        )  # fmt: skip
    log = "\n".join(messages)
    assert zombie.stopped, log
    assert zombie.resumed, log
    assert runner.stats.recoveries >= 1, log
    assert_every_update_once(table_rows(table), truth, log)


def test_values_the_table_refuses_are_dead_letters_with_arrows_message_and_the_rest_exact(
    bootstrap: str, tmp_path: Path
) -> None:
    """The counts of w10..w19 come out as text, which the table's long column
    refuses when the rows become Arrow: each of their updates is a dead letter with
    Arrow's message in one line, every other update a row, once, and no epoch
    failed over them (no recovery)."""
    refused = [f"w{i}" for i in range(10, 20)]
    truth, table, runner, messages = run_wordcount(
        bootstrap, tmp_path, lines=800, seed=11, text=",".join(refused),
    )  # fmt: skip
    log = "\n".join(messages)
    written = Counter({w: c for w, c in truth.items() if w not in refused})
    assert_every_update_once(table_rows(table), written, log)
    assert_refusals_are_dead_letters(
        bootstrap,
        runner,
        refused,
        truth,
        log,
        prefix=f"RecordRefusedError: Delta table {table}",
        column="count (long)",
    )


@pytest.mark.s3
def test_every_update_lands_once_in_a_table_in_an_object_store(
    bootstrap: str, tmp_path: Path, bucket: Bucket
) -> None:
    """The same job into ``s3://`` (S3Proxy), a worker killed after the checkpoint
    completed and before the commit: the recovery's commit goes to the object store.

    One worker: S3Proxy's file-system store does not make a put-if-absent atomic, so
    commits of concurrent writers may overwrite each other's log entry (measured with
    plain `write_deltalake` appends too); a Delta table on S3 needs a store that
    does (docs/guide/delta.md)."""
    truth, table, runner, messages = run_wordcount(
        bootstrap, tmp_path, lines=1_500, seed=11, table=bucket.url("word_counts"), workers=1,
        worker_env={"KSTREAM_FAULT": f"completed-before-commit@{FAULT_AT}"},
    )  # fmt: skip
    log = "\n".join(messages)
    assert runner.stats.recoveries >= 1, log
    assert_every_update_once(table_rows(table), truth, log)
    assert any(k.endswith(".parquet") for k in bucket.listing("word_counts/")), log


@pytest.mark.extended
def test_every_update_lands_once_through_kills_at_several_points_on_three_workers(
    bootstrap: str, tmp_path: Path
) -> None:
    """A longer run: 3 workers, 6,000 lines, a worker killed at two 2PC points of two
    checkpoints (the coordinator's third and sixth)."""
    later = SnapshotId(6, COORDINATOR).encode()
    truth, table, runner, messages = run_wordcount(
        bootstrap, tmp_path, lines=6_000, seed=5, workers=3,
        worker_env={
            "KSTREAM_FAULT": f"pre-committed@{FAULT_AT},completed-before-commit@{later}"
        },
    )  # fmt: skip
    log = "\n".join(messages)
    assert runner.stats.recoveries >= 2, log
    assert_every_update_once(table_rows(table), truth, log)
