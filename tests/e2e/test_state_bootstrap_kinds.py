"""`bootstrap_states`: map and list state (and named value state) prepared with Spark.

The job is `keyed_state_job` (per user: a count, a map of event counts, a list
of (n, event) pairs, the longest event name). Its four states are computed by
Spark from a history of lines and bootstrapped into one savepoint; read back
with `read_state` they equal what was written, and a real `kstream run
--from-savepoint` fed new lines emits, for each new line, the summary the
reference computes over history and new lines together: every bootstrapped
entry seen, each new line once.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from job_runs import run_cli, wait_running
from state_spark import spark as spark  # the module's Spark session (a fixture)
from test_job_safety import stop

from kstream.errors import ConfigurationError, StateValueError
from kstream.infra.admin import Admin
from kstream.testing import produce, read_all, unique_name, wait_settled
from kstream.tools.state import read_state
from kstream.tools.state.bootstrap import StateRows, bootstrap_state, bootstrap_states

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.e2e, pytest.mark.audit]

JOB = f"{Path(__file__).with_name('keyed_state_job.py')}:job"
OP = "process"  # the name of its unnamed keyed operator
EVENTS = ["view", "click", "purchase", "scroll", "share", "bookmark-added"]


def user_lines(n: int, seed: int, users: int = 8) -> list[str]:
    rnd = random.Random(seed)
    return [f"u{rnd.randrange(users)} {rnd.choice(EVENTS)}" for _ in range(n)]


def history_states(spark: SparkSession, lines: list[str]) -> list[StateRows]:
    """The job's four states after `lines`, computed by Spark from the lines alone."""
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    df = spark.createDataFrame(
        [(i, *line.split()) for i, line in enumerate(lines)], "i BIGINT, key STRING, event STRING"
    )
    # The list holds (n, event) for each line of the user, n counted from 1.
    ordered = df.withColumn("n", sf.row_number().over(Window.partitionBy("key").orderBy("i")))
    history = ordered.select(
        "key",
        (sf.col("n") - 1).alias("index"),
        # JSON text [3,"view"]: event names need no escaping.
        sf.format_string('[%d,"%s"]', "n", "event").alias("value"),
    )
    return [
        StateRows(df.groupBy("key").count().withColumnRenamed("count", "value")),
        StateRows(df.groupBy("key", "event").count(), "map", "seen", entry="event", value="count"),
        StateRows(history, "list", "history", json_values=True),
        StateRows(
            df.groupBy("key").agg(sf.max(sf.length("event")).cast("bigint").alias("value")),
            "value",
            "longest",
        ),
    ]


def expected_states(lines: list[str]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    seen: dict[tuple[str, str], int] = {}
    history: dict[tuple[str, int], list[Any]] = {}
    longest: dict[str, int] = {}
    for line in lines:
        user, event = line.split()
        counts[user] = counts.get(user, 0) + 1
        seen[user, event] = seen.get((user, event), 0) + 1
        history[user, counts[user] - 1] = [counts[user], event]
        longest[user] = max(longest.get(user, 0), len(event))
    return {"n": counts, "seen": seen, "history": history, "longest": longest}


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "sp"


def test_map_and_list_state_read_back_as_bootstrapped_and_round_trip(
    spark: SparkSession, out: Path, tmp_path: Path
) -> None:
    lines = user_lines(400, seed=1)
    params = {"name": "ks", "input": "a", "output": "b"}
    result = bootstrap_states(
        history_states(spark, lines), JOB, OP, out=str(out), params=params, workers=2
    )
    want = expected_states(lines)
    assert result.op == f"s1.{OP}"
    assert sorted(result.keys) == ["s1-0", "s1-1"]
    assert sum(result.keys.values()) == len(want["n"])  # a key with four states counts once
    url = str(out)
    n = read_state(spark, url, OP, value_type="bigint").collect()
    assert {r.key: r.value for r in n} == want["n"]
    longest = read_state(spark, url, OP, name="longest", value_type="bigint").collect()
    assert {r.key: r.value for r in longest} == want["longest"]
    seen = read_state(spark, url, OP, kind="map", name="seen", value_type="bigint").collect()
    assert {(r.key, r.entry): r.value for r in seen} == want["seen"]
    history = read_state(spark, url, OP, kind="list", name="history").collect()
    assert {(r.key, r["index"]): json.loads(r.value) for r in history} == want["history"]
    # Every row was read from the subtask that owns its key group.
    assert {r.key_group for r in history} == {r.key_group for r in n}

    # read -> DataFrame operations -> bootstrap: drop "view" from every map, and
    # keep only the last two elements of every list, renumbered from 0.
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    maps = read_state(spark, url, OP, kind="map", name="seen", value_type="bigint")
    lists = read_state(spark, url, OP, kind="list", name="history")
    last = Window.partitionBy("key").orderBy(sf.desc("index"))
    lists = (
        lists.withColumn("r", sf.row_number().over(last))
        .where("r <= 2")
        # Of a list's last two elements the older gets index 0, the newer 1.
        .withColumn("index", (sf.count("*").over(Window.partitionBy("key")) - sf.col("r")))
        .select("key", sf.col("index").cast("bigint").alias("index"), "value")
    )
    moved = tmp_path / "moved"
    bootstrap_states(
        [
            StateRows(maps.where("entry != 'view'"), "map", "seen"),
            StateRows(lists, "list", "history", json_values=True),
        ],
        JOB, OP, out=str(moved), params=params, workers=2,
    )  # fmt: skip
    got = read_state(spark, str(moved), OP, kind="map", name="seen", value_type="bigint")
    assert {(r.key, r.entry): r.value for r in got.collect()} == {
        k: v for k, v in want["seen"].items() if k[1] != "view"
    }
    kept = read_state(spark, str(moved), OP, kind="list", name="history").collect()
    tails: dict[str, list[Any]] = {}
    for (user, _), element in sorted(want["history"].items()):
        tails.setdefault(user, []).append(element)
    assert {(r.key, r["index"]): json.loads(r.value) for r in kept} == {
        (user, i): e for user, t in tails.items() for i, e in enumerate(t[-2:])
    }
    # The default value state was not given: the new savepoint has none.
    assert read_state(spark, str(moved), OP).count() == 0


def test_bad_map_and_list_rows_are_refused_with_nothing_written(
    spark: SparkSession, out: Path
) -> None:
    params = {"name": "ks", "input": "a", "output": "b"}

    def refused(error: type[Exception], match: str, df: Any, **kw: Any) -> None:
        with pytest.raises(error, match=match):
            bootstrap_state(df, JOB, OP, out=str(out), params=params, **kw)
        assert not out.exists()

    maps = spark.createDataFrame(
        [("a", "x", 1), ("a", "x", 2), ("a", None, 3), (None, "y", 4), ("b", "x", 5)],
        "key STRING, entry STRING, value BIGINT",
    )
    refused(
        ConfigurationError,
        r"rows of map state 'seen' have 1 null keys, 1 null entries and 1 duplicated "
        r"\(key, entry\) pairs \(2 rows\)",
        maps, kind="map", state="seen",
    )  # fmt: skip
    dup = spark.createDataFrame(
        [("a", 0, "p"), ("a", 0, "q"), ("b", 0, "r")], "key STRING, index BIGINT, value STRING"
    )
    refused(ConfigurationError, r"1 duplicated \(key, index\) pairs \(2 rows\)", dup,
            kind="list", state="history")  # fmt: skip
    gaps = spark.createDataFrame(
        [("a", 0, "p"), ("a", 2, "q"), ("b", 1, "r"), ("c", 0, "s")],
        "key STRING, index BIGINT, value STRING",
    )
    refused(ConfigurationError, "2 keys whose indexes are not 0..n-1", gaps,
            kind="list", state="history")  # fmt: skip
    decimals = spark.sql("SELECT 'a' AS key, CAST(1.5 AS DECIMAL(4,2)) AS entry, 1 AS value")
    refused(StateValueError, r"cannot encode the entry of key 'a': a Decimal entry .*"
            r"\(map state 'seen'\)", decimals, kind="map", state="seen")  # fmt: skip
    refused(ConfigurationError, "a map state needs a name", maps, kind="map")
    refused(ConfigurationError, "window state is not bootstrapped", maps, kind="window")
    refused(ConfigurationError, "'timers' is the runtime's", dup, kind="list", state="timers")
    refused(ConfigurationError, r"no column 'index'", maps, kind="list", state="history")
    with pytest.raises(ConfigurationError, match=r"'nope' has no state .* known: process"):
        bootstrap_state(maps, JOB, "nope", kind="map", state="seen", out=str(out), params=params)
    with pytest.raises(ConfigurationError, match=r"state .seen. of s1\.process is given twice"):
        bootstrap_states(
            [StateRows(maps, "map", "seen"), StateRows(dup, "list", "seen")],
            JOB, OP, out=str(out), params=params,
        )  # fmt: skip
    assert not out.exists()


@pytest.mark.broker
def test_a_job_started_from_bootstrapped_map_and_list_state_goes_on_from_it(
    bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    from keyed_state_job import reference

    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 1, dst: 2})
    history, new = user_lines(600, seed=2), user_lines(80, seed=3, users=10)
    params = {"name": unique_name("ks"), "input": src, "output": dst}
    result = bootstrap_states(
        history_states(spark, history), JOB, OP, out=str(tmp_path / "sp"), params=params,
        workers=2,
    )  # fmt: skip
    produce(bootstrap, src, [(None, line.encode()) for line in new])
    run = run_cli(
        bootstrap, JOB, params, name=params["name"], workers=1, state=tmp_path / "state",
        extra=("--from-savepoint", result.url),
    )  # fmt: skip

    def outputs() -> list[Any]:
        return read_all(bootstrap, dst)

    try:
        wait_running(run, lambda: len(outputs()) >= len(new), "the outputs of the new lines")
    finally:
        if run.poll() is None:
            stop(run)
    wait_settled(bootstrap, dst)
    got: dict[str, list[Any]] = {}
    for r in read_all(bootstrap, dst):  # read_committed, in (partition, offset) order
        got.setdefault((r.key or b"").decode(), []).append(json.loads(r.value or b"null"))
    full = reference(history + new)
    before = {line.split()[0] for line in history}
    for user, summaries in full.items():
        if user not in before:
            continue
        for s in summaries:
            # The bootstrapped elements came from Spark (JSON arrays): lists, not tuples.
            s["tuples"] = False
    mine = {u: sum(1 for line in new if line.split()[0] == u) for u in got}
    # Each new line once, its summary counting every bootstrapped entry.
    assert got == {u: full[u][-k:] for u, k in mine.items()}
    assert sum(len(v) for v in got.values()) == len(new)
    assert set(got) == {line.split()[0] for line in new}
    assert set(got) - before, "some users of the new lines have no history"


@pytest.mark.extended
def test_the_cli_bootstraps_list_state_from_what_state_read_wrote(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Extended (~45 s: a Spark of its own in the subprocess); the default tier
    covers `bootstrap_state`, which the command calls."""
    first = tmp_path / "first"
    params = {"name": "ks", "input": "a", "output": "b"}
    lines = user_lines(50, seed=4)
    bootstrap_states(history_states(spark, lines), JOB, OP, out=str(first), params=params)
    # What `kstream state read --kind list` writes: key_group, key, index, value (JSON text).
    table = tmp_path / "history.parquet"
    read_state(spark, str(first), OP, kind="list", name="history").write.parquet(str(table))
    out = tmp_path / "sp"
    done = subprocess.run(
        [sys.executable, "-m", "kstream", "state", "bootstrap", "--from", str(table),
         "--job", JOB, *(a for k, v in params.items() for a in ("-p", f"{k}={v}")),
         "--operator", OP, "--kind", "list", "--state", "history", "--json-values",
         "--out", str(out), "--workers", "2", "--master", "local[2]"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"file://{out}"
    back = read_state(spark, str(out), OP, kind="list", name="history").collect()
    assert {(r.key, r["index"]): json.loads(r.value) for r in back} == (
        expected_states(lines)["history"]
    )
