"""`bootstrap_state`: counts computed by Spark over history become the word count's
state; started from them and fed new lines, each word's outputs go on from there.

Real broker, real `kstream run --from-savepoint` processes, output read with
read_committed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from job_runs import wait_running
from state_spark import spark as spark  # the module's Spark session (a fixture)
from test_job_safety import Job, counts, lines, stop, truth

from kstream.errors import CheckpointError, ConfigurationError, StateValueError
from kstream.infra.admin import Admin
from kstream.testing import produce, unique_name, wait_settled
from kstream.tools.state import read_state
from kstream.tools.state.bootstrap import bootstrap_state

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.audit]


def history_counts(spark: SparkSession, text: list[str]) -> DataFrame:
    """Each word's count over `text`, computed by Spark: columns word, count."""
    from pyspark.sql import functions as sf

    df = spark.createDataFrame([(t,) for t in text], "line STRING")
    return df.select(sf.explode(sf.split("line", " ")).alias("word")).groupBy("word").count()


def test_counts_from_history_then_new_lines_go_on_exactly_once(
    bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    history, new = lines(1500), lines(300, salt=3)
    job = Job(bootstrap, tmp_path)
    params = {"input": src, "output": dst}
    out = tmp_path / "bootstrapped"
    result = bootstrap_state(
        history_counts(spark, history), f"{job.file}:job", "count",
        key="word", value="count", out=str(out), params=params, workers=2,
    )  # fmt: skip
    assert result.op == "s1.count"
    assert sum(result.keys.values()) == len(truth(history))
    assert sorted(result.keys) == ["s1-0", "s1-1"]
    # Read back, it is the history's counts.
    back = read_state(spark, str(out), "count", value_type="bigint").collect()
    assert {r.key: r.value for r in back} == dict(truth(history))
    produce(bootstrap, src, [(None, t.encode()) for t in new])
    run = job.run(src, dst, "--from-savepoint", result.url)
    total = truth(history + new)
    try:
        wait_running(
            run,
            lambda: (
                {w: max(v) for w, v in counts(bootstrap, dst).items()}
                == {w: total[w] for w in truth(new)}
            ),
            "the bootstrapped job to count the new lines",
        )
    finally:
        stop(run)
    wait_settled(bootstrap, dst)
    outputs = counts(bootstrap, dst)
    before = truth(history)
    for word, n in truth(new).items():
        # The first new output is history + 1, then one more each: exactly once.
        assert outputs[word] == list(range(before[word] + 1, before[word] + n + 1)), word
    assert set(outputs) == set(truth(new))


def test_bad_frames_and_targets_are_refused_with_nothing_left(
    spark: SparkSession, tmp_path: Path
) -> None:
    job = Job("127.0.0.1:1", tmp_path)  # never run: only its plan is needed
    spec, params = f"{job.file}:job", {"input": "a", "output": "b"}
    dupes = spark.createDataFrame(
        [("a", 1), ("a", 2), ("b", 1), ("b", 3), ("b", 4), (None, 5), ("c", 1)],
        "word STRING, count BIGINT",
    )
    out = tmp_path / "sp"
    with pytest.raises(ConfigurationError, match=r"1 null keys and 2 duplicated keys \(5 rows\)"):
        bootstrap_state(dupes, spec, "count", key="word", value="count", out=str(out),
                        params=params)  # fmt: skip
    assert not out.exists()
    decimals = spark.sql("SELECT 'x' AS word, CAST(1.5 AS DECIMAL(4,2)) AS count")
    with pytest.raises(StateValueError, match="cannot encode the value of key 'x': a Decimal"):
        bootstrap_state(decimals, spec, "count", key="word", value="count", out=str(out),
                        params=params)  # fmt: skip
    assert not out.exists()
    with pytest.raises(ConfigurationError, match=r"'tally' has no state .* known: count"):
        bootstrap_state(decimals, spec, "tally", key="word", value="count", out=str(out),
                        params=params)  # fmt: skip
    out.mkdir()
    (out / "x").write_text("")
    with pytest.raises(CheckpointError, match="is not empty"):
        bootstrap_state(decimals, spec, "count", key="word", value="count", out=str(out),
                        params=params)  # fmt: skip


@pytest.mark.extended
def test_the_cli_bootstraps_from_a_parquet_table(spark: SparkSession, tmp_path: Path) -> None:
    """Extended (~45 s: a Spark of its own in the subprocess); the default tier
    covers `bootstrap_state`, which the command calls."""
    job = Job("127.0.0.1:1", tmp_path)  # never run: only its plan is needed
    table = tmp_path / "counts.parquet"
    spark.createDataFrame([("a", 3), ("b", 5)], "word STRING, n BIGINT").write.parquet(str(table))
    out = tmp_path / "sp"
    done = subprocess.run(
        [sys.executable, "-m", "kstream", "state", "bootstrap", "--from", str(table),
         "--job", f"{job.file}:job", "-p", "input=a", "-p", "output=b", "--operator", "count",
         "--key", "word", "--value", "n", "--out", str(out), "--workers", "2",
         "--master", "local[2]"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"file://{out}"
    back = read_state(spark, str(out), "count", value_type="bigint").collect()
    assert {r.key: r.value for r in back} == {"a": 3, "b": 5}
