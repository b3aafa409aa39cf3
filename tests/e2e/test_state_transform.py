"""`transform_state`: a real word count's savepoint migrated with DataFrame operations.

The word count counted mixed-case words; the migration lower-cases every key and
sums the counts of the words that merge. The job started from the migrated
savepoint goes on reading its input where the original stopped (the source
subtasks' snapshots are carried over) and each word's first new output is its
migrated count + 1, exactly once. Real broker, real `kstream run` processes,
output read with read_committed.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest
from job_runs import stop_with_savepoint, wait_running
from state_spark import spark as spark  # the module's Spark session (a fixture)
from test_cli_run import wait_for
from test_job_safety import Job, caught_up, counts, lines, truth

from kstream.errors import CheckpointError, ConfigurationError, StateValueError
from kstream.infra.admin import Admin
from kstream.testing import produce, unique_name, wait_settled
from kstream.tools.state import read_state
from kstream.tools.state.transform import transform_state

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.audit]


def mixed_case(n: int) -> list[str]:
    """Word-count lines where every third line capitalises its first word."""
    text = lines(n)
    return [t.capitalize() if i % 3 == 0 else t for i, t in enumerate(text)]


def lower_and_merge(state: DataFrame) -> DataFrame:
    """The documented migration: keys lower-cased, the counts of merged keys summed."""
    from pyspark.sql import functions as sf

    return (
        state.withColumn("key", sf.lower("key")).groupBy("key").agg(sf.sum("value").alias("value"))
    )


def lowered(c: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for w, n in c.items():
        out[w.lower()] += n
    return out


@pytest.fixture(scope="module")
def stopped_run(
    bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Job, str, str, str, list[str]]:
    """A word count stopped with a savepoint after counting mixed-case lines:
    (job, input, output, savepoint URL, the lines)."""
    tmp = tmp_path_factory.mktemp("wc")
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = mixed_case(900)
    produce(bootstrap, src, [(None, t.encode()) for t in text])
    job = Job(bootstrap, tmp)
    run = job.run(src, dst)
    wait_for(lambda: caught_up(bootstrap, dst, truth(text)), 90, "the job to catch up")
    return job, src, dst, stop_with_savepoint(bootstrap, job.name, run), text


def test_migrated_counts_go_on_from_the_merged_count_exactly_once(
    bootstrap: str,
    spark: SparkSession,
    stopped_run: tuple[Job, str, str, str, list[str]],
    tmp_path: Path,
) -> None:
    job, src, dst, url, text = stopped_run
    before = truth(text)
    assert any(w != w.lower() for w in before)  # there is something to merge
    migrated = lowered(before)
    out = tmp_path / "migrated"
    result = transform_state(spark, url, "count", lower_and_merge, str(out), value_type="bigint")
    assert result.op == "s1.count"
    assert sum(result.keys.values()) == len(migrated)
    back = read_state(spark, result.url, "count", value_type="bigint").collect()
    assert {r.key: r.value for r in back} == dict(migrated)
    # The original is untouched.
    old = read_state(spark, url, "count", value_type="bigint").collect()
    assert {r.key: r.value for r in old} == dict(before)
    new = lines(300, salt=5)
    produce(bootstrap, src, [(None, t.encode()) for t in new])
    resumed = copy.copy(job)
    resumed.name = f"{job.name}-migrated"
    run = resumed.run(src, dst, "--from-savepoint", result.url)
    try:
        wait_running(
            run,
            lambda: all(
                max(counts(bootstrap, dst).get(w, [0])) == migrated[w] + n
                for w, n in truth(new).items()
            ),
            "the migrated job to count the new lines",
        )
    finally:
        run.terminate()
        run.communicate(timeout=90)
    wait_settled(bootstrap, dst)
    outputs = counts(bootstrap, dst)
    for word, n in truth(new).items():
        # The original run's outputs 1..before, then migrated + 1 ... exactly once:
        # nothing of the old input is counted again (its offsets were carried over).
        resumed_from = migrated[word] + 1
        expected = [*range(1, before[word] + 1), *range(resumed_from, resumed_from + n)]
        assert outputs[word] == expected, word
    for word in set(before) - set(truth(new)):
        assert outputs[word] == list(range(1, before[word] + 1)), word


def test_bad_transforms_are_refused_with_nothing_left(
    spark: SparkSession, stopped_run: tuple[Job, str, str, str, list[str]], tmp_path: Path
) -> None:
    from pyspark.sql import functions as sf

    job, _, _, url, _ = stopped_run
    out = tmp_path / "sp"
    # lower() merges keys: without the sum they are duplicates, refused with counts.
    with pytest.raises(ConfigurationError, match=r"key column 'key' has 0 null keys and \d+ dup"):
        transform_state(spark, url, "count", lambda s: s.withColumn("key", sf.lower("key")),
                        str(out), value_type="bigint")  # fmt: skip
    assert not out.exists()
    with pytest.raises(ConfigurationError, match=r"has [1-9]\d* null keys and 0 duplicated"):
        transform_state(spark, url, "count", lambda s: s.withColumn("key", sf.lit(None)),
                        str(out), value_type="bigint")  # fmt: skip
    assert not out.exists()
    # JSON text that does not parse is a value the serde cannot be given: the first row.
    with pytest.raises(StateValueError, match=r"cannot encode the value of key '\w+': a str"):
        transform_state(spark, url, "count", lambda s: s.withColumn("value", sf.lit("{")),
                        str(out))  # fmt: skip
    assert not out.exists()
    with pytest.raises(ConfigurationError, match="no value column"):
        transform_state(spark, url, "count", lambda s: s.select("key"), str(out))
    with pytest.raises(ConfigurationError, match=r"'nope' has no state .* known: count"):
        transform_state(spark, url, "nope", lambda s: s, str(out))
    checkpoints = sorted((job.state / job.name / "checkpoints").glob("chk-*"))
    if checkpoints:  # a stopped job may keep its last checkpoint
        with pytest.raises(ConfigurationError, match="is a checkpoint: transform a savepoint"):
            transform_state(spark, str(checkpoints[-1]), "s1.count", lambda s: s, str(out))
    with pytest.raises(CheckpointError, match="is not empty"):
        transform_state(spark, url, "count", lambda s: s, urlsplit(url).path)
    assert not out.exists()


@pytest.mark.extended
def test_the_cli_transforms_with_a_sql_query(
    spark: SparkSession, stopped_run: tuple[Job, str, str, str, list[str]], tmp_path: Path
) -> None:
    """Extended (~45 s: a Spark of its own in the subprocess); the default tier
    covers `transform_state`, which the command calls."""
    _, _, _, url, text = stopped_run
    out = tmp_path / "dropped"
    done = subprocess.run(
        [sys.executable, "-m", "kstream", "state", "transform", url, "--operator", "count",
         "--sql", "SELECT key, value FROM state WHERE key NOT LIKE 'W%'",
         "--value-type", "bigint", "--out", str(out), "--master", "local[2]"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"file://{out}"
    back = read_state(spark, str(out), "count", value_type="bigint").collect()
    assert {r.key: r.value for r in back} == {
        w: n for w, n in truth(text).items() if not w.startswith("W")
    }
