"""The word count into PostgreSQL on real worker processes, with real SIGKILLs at
every point of the two-phase commit, and a worker stopped past its liveness timeout.

The table is read with psycopg, independently of the sink, and compared with the
truth computed from the input: every (word, n) for n in 1..count(word) exactly once.
"""

from __future__ import annotations

import ast
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from sink_wordcount import (
    FAULT_AT,
    POINTS,
    Zombie,
    assert_every_update_once,
    run_sink_wordcount,
)

from kstream.infra.postgres import LocalPostgres
from kstream.protocol.names import ERROR_HEADER, dead_letter_topic
from kstream.runtime.runner.runner import Runner, RunningJob
from kstream.testing import read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.postgres]

JOB = f"{Path(__file__).with_name('wordcount_job.py')}:job"


def run_wordcount(
    bootstrap: str,
    url: str,
    tmp_path: Path,
    *,
    lines: int,
    seed: int,
    mode: str = "insert",
    worker_env: dict[str, str] | None = None,
    liveness_timeout: float = 15.0,
    chaos: Callable[[RunningJob], None] | None = None,
    check: str = "",
) -> tuple[Counter[str], str, Runner, list[str]]:
    """The word count (`sink_wordcount.run_sink_wordcount`) into a new table; the
    truth (word -> count) and the table's name. `check`: a CHECK
    constraint's expression the table gets."""
    run = unique_name("pgwc")
    src, table = f"{run}-in", run.replace("-", "_")
    with psycopg.connect(url, autocommit=True) as conn:
        key = "PRIMARY KEY" if mode == "upsert" else ""
        constraint = f", CONSTRAINT some_words CHECK ({check})" if check else ""
        conn.execute(f"CREATE TABLE {table} (word text {key}, count bigint NOT NULL{constraint})")
    params = {"input": src, "url": url, "table": table, "mode": mode, "name": run}
    truth, runner, messages = run_sink_wordcount(
        bootstrap, tmp_path, JOB, params, lines=lines, seed=seed,
        worker_env=worker_env, liveness_timeout=liveness_timeout, chaos=chaos,
    )  # fmt: skip
    return truth, table, runner, messages


def table_rows(url: str, table: str) -> Counter[tuple[str, int]]:
    with psycopg.connect(url) as conn:
        return Counter(conn.execute(f"SELECT word, count FROM {table}").fetchall())


def leftover(url: str, table: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [
            g for (g,) in conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall() if table in g
        ]


def assert_landed_once(url: str, table: str, truth: Counter[str], log: str) -> None:
    """Every update once in the table, and no prepared transaction of it left."""
    assert_every_update_once(table_rows(url, table), truth, log)
    assert leftover(url, table) == [], log


@pytest.mark.parametrize("point", POINTS)
def test_every_update_lands_once_with_a_worker_killed_at_a_2pc_point(
    bootstrap: str, postgres_url: str, tmp_path: Path, point: str
) -> None:
    truth, table, runner, messages = run_wordcount(
        bootstrap, postgres_url, tmp_path, lines=1_500, seed=POINTS.index(point),
        worker_env={"KSTREAM_FAULT": f"{point}@{FAULT_AT}"},
    )  # fmt: skip
    log = "\n".join(messages)
    assert runner.stats.recoveries >= 1, log  # the armed point killed a worker
    assert_landed_once(postgres_url, table, truth, log)


def test_upserted_counts_are_the_truth_after_a_kill_after_the_commit(
    bootstrap: str, postgres_url: str, tmp_path: Path
) -> None:
    truth, table, runner, messages = run_wordcount(
        bootstrap, postgres_url, tmp_path, lines=1_500, seed=7, mode="upsert",
        worker_env={"KSTREAM_FAULT": f"completed-before-commit@{FAULT_AT}"},
    )  # fmt: skip
    log = "\n".join(messages)
    assert runner.stats.recoveries >= 1, log
    assert table_rows(postgres_url, table) == Counter(truth.items()), log
    assert leftover(postgres_url, table) == [], log


def test_a_worker_stopped_past_its_liveness_timeout_commits_nothing_when_it_wakes(
    bootstrap: str, postgres_url: str, tmp_path: Path
) -> None:
    """SIGSTOP one worker mid-run (it may hold an open epoch's transaction and a
    prepared one); the job rolls back without it; SIGCONT it after the rollback:
    whatever it tries as a zombie must not land."""
    with Zombie(liveness_timeout=4.0).released() as zombie:
        truth, table, runner, messages = run_wordcount(
            bootstrap, postgres_url, tmp_path, lines=2_000, seed=3,
            liveness_timeout=zombie.liveness_timeout, chaos=zombie,
        )  # fmt: skip
    log = "\n".join(messages)
    assert zombie.stopped, log
    assert zombie.resumed, log
    assert runner.stats.recoveries >= 1, log
    assert_landed_once(postgres_url, table, truth, log)


def test_rows_the_table_refuses_are_dead_letters_with_its_message_and_the_rest_exact(
    bootstrap: str, postgres_url: str, tmp_path: Path
) -> None:
    """The table refuses the words w10..w19 (a CHECK constraint): each of their
    updates is a dead letter with PostgreSQL's message, every other one a row."""
    refused = {f"w{i}" for i in range(10, 20)}
    truth, table, runner, messages = run_wordcount(
        bootstrap, postgres_url, tmp_path, lines=800, seed=11,
        check="word !~ '^w1[0-9]$'",
    )  # fmt: skip
    log = "\n".join(messages)
    written = Counter({w: c for w, c in truth.items() if w not in refused})
    assert_landed_once(postgres_url, table, written, log)
    dead = read_all(bootstrap, dead_letter_topic(table.replace("_", "-")))
    got = Counter(ast.literal_eval((r.value or b"").decode()) for r in dead)
    expected = Counter({(w, n): 1 for w in refused for n in range(1, truth[w] + 1)})
    assert runner.stats.recoveries == 0, log  # so each refusal was handed over once
    assert got == expected, log
    error = dict(dead[0].headers)[ERROR_HEADER].decode()
    assert error.startswith(f"RecordRefusedError: {table} refused row ('w1"), error
    assert 'violates check constraint "some_words" (Failing row contains (w1' in error, error


def test_the_database_restarted_mid_run_loses_nothing(
    bootstrap: str, postgres_server: LocalPostgres, tmp_path: Path
) -> None:
    """``pg_ctl stop -m fast`` while the word count writes, and start only after the
    job tried to recover without the server: every session is cut, open epochs are
    rolled back by the server, prepared ones survive it; the job rolls back until it
    can reach the server, and its recovery finishes them."""
    down: list[float] = []
    up: list[int] = []

    def restart(running: RunningJob) -> None:
        if not down and running.stats.completed >= 3:
            postgres_server.stop()
            down.append(time.monotonic())
        elif down and not up and (running.stats.recoveries >= 3 or time.monotonic() > down[0] + 30):
            up.append(running.stats.recoveries)
            postgres_server.start()

    try:
        truth, table, runner, messages = run_wordcount(
            bootstrap, postgres_server.url, tmp_path, lines=1_500, seed=5, chaos=restart
        )
    finally:
        postgres_server.start()  # idempotent: the next tests need it
    log = "\n".join(messages)
    assert up == [3], log  # a recovery failed while the server was down
    assert runner.stats.recoveries >= 3, log
    assert_landed_once(postgres_server.url, table, truth, log)
