"""`kstream state read` and `read_state` on a savepoint of a real word count run.

A real broker, real `kstream run` processes, a savepoint taken with
`kstream savepoint --stop`, and Spark reading it back (one task per subtask
snapshot). The read counts must equal the counts computed from the input.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from job_runs import stop_with_savepoint
from state_spark import spark as spark  # the module's Spark session (a fixture)
from test_cli_run import wait_for
from test_job_safety import Job, caught_up, lines, truth

from kstream.errors import CheckpointError, ConfigurationError
from kstream.infra.admin import Admin
from kstream.testing import produce, unique_name
from kstream.tools.state import read_state

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.audit]


@pytest.fixture(scope="session")
def wordcount_savepoint(
    bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, dict[str, int]]:
    """A savepoint of a word count that counted 2000 lines, and the counts of those lines."""
    tmp = tmp_path_factory.mktemp("wc")
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    text = lines(2000)
    produce(bootstrap, src, [(None, line.encode()) for line in text])
    job = Job(bootstrap, tmp)
    run = job.run(src, dst)
    wait_for(lambda: caught_up(bootstrap, dst, truth(text)), 90, "the job to catch up")
    return stop_with_savepoint(bootstrap, job.name, run), dict(truth(text))


def test_read_back_equals_the_counts_of_the_input(
    wordcount_savepoint: tuple[str, dict[str, int]], spark: object
) -> None:
    url, expected = wordcount_savepoint
    df = read_state(spark, url, "count", value_type="bigint")  # type: ignore[arg-type]
    assert df.columns == ["key_group", "key", "value"]
    rows = df.collect()
    assert {r.key: r.value for r in rows} == expected
    assert len(rows) == len(expected)  # one row per key
    # The rows came from both subtasks' databases, each its own key-group range.
    assert df.rdd.getNumPartitions() == 2
    assert all(0 <= r.key_group < 128 for r in rows)


def test_bad_locations_and_operators_are_one_line(
    wordcount_savepoint: tuple[str, dict[str, int]], spark: object, tmp_path: Path
) -> None:
    url, _ = wordcount_savepoint
    with pytest.raises(CheckpointError, match="is not a kstream savepoint"):
        read_state(spark, str(tmp_path), "count")  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError, match=r"'nope' has no state .* known: count \(stage 1\)"
    ):
        read_state(spark, url, "nope")  # type: ignore[arg-type]
    newer = tmp_path / "newer"
    shutil.copytree(urlsplit(url).path, newer)
    info = json.loads((newer / "savepoint.json").read_text())
    (newer / "savepoint.json").write_text(json.dumps({**info, "version": 2}))
    with pytest.raises(CheckpointError, match="format version 2; this kstream reads version 1"):
        read_state(spark, str(newer), "count")  # type: ignore[arg-type]


def test_cli_writes_parquet_and_refuses_in_one_line(
    wordcount_savepoint: tuple[str, dict[str, int]], tmp_path: Path
) -> None:
    url, expected = wordcount_savepoint
    out = tmp_path / "counts.json"
    done = subprocess.run(
        [sys.executable, "-m", "kstream", "state", "read", url, "--operator", "count",
         "--value-type", "bigint", "--output", str(out), "--format", "json",
         "--master", "local[2]"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = {}
    for part in out.glob("part-*.json"):
        for line in part.read_text().splitlines():
            row = json.loads(line)
            got[row["key"]] = row["value"]
    assert got == expected
    bad = subprocess.run(
        [sys.executable, "-m", "kstream", "state", "read", url, "--operator", "nope"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "known: count" in bad.stderr
