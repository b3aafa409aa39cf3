"""`transform_states`: a real job's map and list state migrated, the job resuming.

The job is `keyed_state_job` (per user: a count, a map of event counts, a list
of (n, event) pairs, the longest event name). It runs on the first part of its
input (two partitions, each user's lines in one) and stops with a savepoint.
One transform then drops every map's "view" entry and adds 100 to the others,
and keeps each list's last two elements, renumbered from 0; the count and the
longest name are not given, so they are kept. Started from the new savepoint,
the job reads the rest of the input. Each user's outputs, read with
read_committed, are the reference's summaries of the first part and then,
for each new line once, the summary computed from the transformed state: the
count goes on from where it stopped (no line read twice, none skipped), and
the map and list are the transformed ones.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from job_runs import run_cli, stop_with_savepoint, wait_running
from state_spark import spark as spark  # the module's Spark session (a fixture)
from test_job_safety import stop

from kstream.errors import CheckpointError, ConfigurationError
from kstream.infra.admin import Admin
from kstream.testing import produce, read_all, unique_name, wait_settled
from kstream.tools.state import read_state
from kstream.tools.state.bootstrap import StateRows
from kstream.tools.state.transform import transform_state, transform_states

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.audit]

JOB = f"{Path(__file__).with_name('keyed_state_job.py')}:job"
OP = "process"  # the name of its unnamed keyed operator
EVENTS = ["view", "click", "purchase", "scroll", "share", "bookmark-added"]
#: Added to every map value the transform keeps.
BUMP = 100
#: List elements the transform keeps (the last ones).
KEEP = 2


def user_lines(n: int, seed: int, users: int) -> list[str]:
    rnd = random.Random(seed)
    return [f"u{rnd.randrange(users)} {rnd.choice(EVENTS)}" for _ in range(n)]


def send(bootstrap: str, topic: str, lines: list[str]) -> None:
    # Keyed by user: a user's lines stay in one partition, in order.
    produce(bootstrap, topic, [(line.split()[0].encode(), line.encode()) for line in lines])


def migrate_map(seen: DataFrame) -> DataFrame:
    return seen.where("entry != 'view'").withColumn("value", seen.value + BUMP)


def migrate_list(history: DataFrame) -> DataFrame:
    """Each list's last `KEEP` elements, the older at index 0."""
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    last = Window.partitionBy("key").orderBy(sf.desc("index"))
    return (
        history.withColumn("r", sf.row_number().over(last))
        .where(f"r <= {KEEP}")
        .withColumn("index", sf.count("*").over(Window.partitionBy("key")) - sf.col("r"))
        .select("key", sf.col("index").cast("bigint").alias("index"), "value")
    )


def resumed_reference(first: list[str], rest: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each user's summaries of the lines `rest`, by the job's rules, from the state
    after `first` as the transform leaves it."""
    n: dict[str, int] = {}
    seen: dict[str, dict[str, int]] = {}
    history: dict[str, list[Any]] = {}
    longest: dict[str, int] = {}
    for line in first:
        user, event = line.split()
        n[user] = n.get(user, 0) + 1
        seen.setdefault(user, {})[event] = seen.get(user, {}).get(event, 0) + 1
        # Elements that went through Spark come back as lists, not tuples.
        history.setdefault(user, []).append([n[user], event])
        longest[user] = max(longest.get(user, 0), len(event))
    for user in seen:
        seen[user] = {e: c + BUMP for e, c in seen[user].items() if e != "view"}
        history[user] = history[user][-KEEP:]
    out: dict[str, list[dict[str, Any]]] = {}
    for line in rest:
        user, event = line.split()
        n[user] = n.get(user, 0) + 1
        mine = seen.setdefault(user, {})
        mine[event] = mine.get(event, 0) + 1
        kept = history.setdefault(user, [])
        kept.append((n[user], event))
        longest[user] = max(longest.get(user, 0), len(event))
        out.setdefault(user, []).append(
            {
                "n": n[user],
                "seen": mine[event],
                "kinds": sorted(mine),
                "history": len(kept),
                "last": [list(x) for x in kept[-3:]],
                "tuples": all(type(x) is tuple for x in kept),
                "longest": longest[user],
            }
        )
    return out


def by_user(bootstrap: str, topic: str) -> dict[str, list[Any]]:
    got: dict[str, list[Any]] = {}
    for r in read_all(bootstrap, topic):  # read_committed, in (partition, offset) order
        got.setdefault((r.key or b"").decode(), []).append(json.loads(r.value or b"null"))
    return got


@pytest.fixture(scope="module")
def stopped(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The job stopped with a savepoint after the first lines: its topics, parameters,
    lines and savepoint URL."""
    tmp = tmp_path_factory.mktemp("ks")
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    first = user_lines(400, seed=5, users=8)
    send(bootstrap, src, first)
    params = {"name": unique_name("ks"), "input": src, "output": dst}
    run = run_cli(bootstrap, JOB, params, name=params["name"], workers=2, state=tmp / "state")
    wait_running(
        run, lambda: len(read_all(bootstrap, dst)) >= len(first), "the outputs of the first lines"
    )
    url = stop_with_savepoint(bootstrap, params["name"], run)
    return {"src": src, "dst": dst, "params": params, "first": first, "url": url, "tmp": tmp}


def test_a_job_resumes_from_its_transformed_map_and_list_state_exactly_once(
    bootstrap: str, spark: SparkSession, stopped: dict[str, Any], tmp_path: Path
) -> None:
    from keyed_state_job import reference

    url, first, params = stopped["url"], stopped["first"], stopped["params"]
    seen = read_state(spark, url, OP, kind="map", name="seen", value_type="bigint")
    history = read_state(spark, url, OP, kind="list", name="history")
    result = transform_states(
        spark, url, OP,
        [StateRows(migrate_map(seen), "map", "seen"),
         StateRows(migrate_list(history), "list", "history", json_values=True)],
        str(tmp_path / "migrated"),
    )  # fmt: skip
    assert result.op == f"s1.{OP}"
    users = {line.split()[0] for line in first}
    assert sum(result.keys.values()) == len(users)
    # Read back: the given states transformed, the others as they were.
    moved = read_state(spark, result.url, OP, kind="map", name="seen", value_type="bigint")
    old = {(r.key, r.entry): r.value for r in seen.collect()}
    assert {(r.key, r.entry): r.value for r in moved.collect()} == {
        k: v + BUMP for k, v in old.items() if k[1] != "view"
    }
    assert any(k[1] == "view" for k in old)  # something was dropped
    for name in (None, "longest"):
        kept = read_state(spark, result.url, OP, name=name, value_type="bigint").collect()
        was = read_state(spark, url, OP, name=name, value_type="bigint").collect()
        assert sorted(kept) == sorted(was)
        assert len(kept) == len(users)

    rest = user_lines(120, seed=6, users=10)
    send(bootstrap, stopped["src"], rest)
    run = run_cli(
        bootstrap, JOB, params, name=f"{params['name']}-migrated", workers=2,
        state=tmp_path / "state", extra=("--from-savepoint", result.url),
    )  # fmt: skip
    total = len(first) + len(rest)
    try:
        wait_running(
            run,
            lambda: len(read_all(bootstrap, stopped["dst"])) >= total,
            "the outputs of the rest of the lines",
        )
    finally:
        if run.poll() is None:
            stop(run)
    wait_settled(bootstrap, stopped["dst"])
    got = by_user(bootstrap, stopped["dst"])
    before, after = reference(first), resumed_reference(first, rest)
    # Per user: the first run's summaries, then one per new line from the
    # transformed state; the count `n` runs on without a repeat or a gap.
    assert got == {u: before.get(u, []) + after.get(u, []) for u in set(before) | set(after)}
    assert sum(len(v) for v in got.values()) == total
    assert set(after) - users, "some users of the rest have no state before"
    assert users & set(after), "some users of the rest have transformed state"


def test_one_state_transformed_keeps_the_others_and_bad_transforms_are_refused(
    spark: SparkSession, stopped: dict[str, Any], tmp_path: Path
) -> None:
    url = stopped["url"]
    out = tmp_path / "one"
    # transform_state of one list: the map and the value states are kept.
    result = transform_state(
        spark, url, OP, lambda h: h.where("index = 0"), str(out), kind="list", name="history"
    )
    back = read_state(spark, result.url, OP, kind="list", name="history").collect()
    want = read_state(spark, url, OP, kind="list", name="history").where("index = 0")
    assert sorted((r.key, r.value) for r in back) == sorted(
        (r.key, r.value) for r in want.collect()
    )
    for kind, name in (("map", "seen"), ("value", None), ("value", "longest")):
        kept = read_state(spark, result.url, OP, kind=kind, name=name).collect()
        was = read_state(spark, url, OP, kind=kind, name=name).collect()
        assert sorted(kept) == sorted(was), (kind, name)
        assert kept, (kind, name)

    bad = tmp_path / "bad"
    seen = read_state(spark, url, OP, kind="map", name="seen")
    history = read_state(spark, url, OP, kind="list", name="history")

    def refused(error: type[Exception], match: str, states: list[StateRows]) -> None:
        with pytest.raises(error, match=match):
            transform_states(spark, url, OP, states, str(bad))
        assert not bad.exists()

    refused(ConfigurationError, r"window state is not transformed",
            [StateRows(seen, "window")])  # fmt: skip
    refused(ConfigurationError, r"state 'seen' of s1\.process is given twice",
            [StateRows(seen, "map", "seen"), StateRows(history, "list", "seen")])  # fmt: skip
    refused(ConfigurationError, r"'windows' is the runtime's",
            [StateRows(seen, "map", "windows")])  # fmt: skip
    refused(ConfigurationError, r"list state 'history' .* 0\.\.n-1",
            [StateRows(history.where("index != 0"), "list", "history")])  # fmt: skip
    refused(ConfigurationError, r"1 duplicated \(key, entry\) pairs \(2 rows\)",
            [StateRows(seen.union(seen.limit(1)), "map", "seen")])  # fmt: skip
    with pytest.raises(ConfigurationError, match="timer state is not transformed"):
        transform_state(spark, url, OP, lambda s: s, str(bad), kind="timer")
    with pytest.raises(ConfigurationError, match="no entry column"):
        transform_state(spark, url, OP, lambda s: s.select("key", "value"), str(bad),
                        kind="map", name="seen")  # fmt: skip
    with pytest.raises(CheckpointError, match="is not empty"):
        transform_states(spark, url, OP, [StateRows(seen, "map", "seen")], str(out))
    assert not bad.exists()


@pytest.mark.extended
def test_the_cli_transforms_a_map_state_with_a_sql_query(
    spark: SparkSession, stopped: dict[str, Any], tmp_path: Path
) -> None:
    """Extended (~45 s: a Spark of its own in the subprocess); the default tier
    covers `transform_state`, which the command calls."""
    url = stopped["url"]
    out = tmp_path / "no-views"
    done = subprocess.run(
        [sys.executable, "-m", "kstream", "state", "transform", url, "--operator", OP,
         "--kind", "map", "--state", "seen", "--value-type", "bigint",
         "--sql", "SELECT key, entry, value * 2 AS value FROM state WHERE entry != 'view'",
         "--out", str(out), "--master", "local[2]"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"file://{out}"
    seen = read_state(spark, url, OP, kind="map", name="seen", value_type="bigint").collect()
    back = read_state(spark, str(out), OP, kind="map", name="seen", value_type="bigint")
    assert {(r.key, r.entry): r.value for r in back.collect()} == {
        (r.key, r.entry): 2 * r.value for r in seen if r.entry != "view"
    }
    kept = read_state(spark, str(out), OP, kind="list", name="history").collect()
    assert sorted(kept) == sorted(read_state(spark, url, OP, kind="list", name="history").collect())
    refused = subprocess.run(
        [sys.executable, "-m", "kstream", "state", "transform", url, "--operator", OP,
         "--kind", "window", "--sql", "SELECT * FROM state", "--out", str(tmp_path / "w")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "window state is not transformed" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
