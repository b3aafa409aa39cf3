"""`kstream.tools.chaos.resources` and its part of the report: memory and disk over time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kstream.tools.chaos.report import resources_json
from kstream.tools.chaos.resources import ResourceSample, disk_bytes, rss_bytes, sample


def test_rss_is_read_from_proc_and_a_gone_process_has_none() -> None:
    mine = rss_bytes(os.getpid())
    assert mine is not None
    assert mine > 1024 * 1024
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert rss_bytes(child.pid) is None


def test_disk_is_the_blocks_of_every_file_below_a_directory(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_bytes(os.urandom(100_000))
    (tmp_path / "y").write_bytes(b"2" * 24)
    blocks = sum(os.stat(p).st_blocks * 512 for p in (tmp_path / "a" / "x", tmp_path / "y"))
    assert disk_bytes(tmp_path) == blocks >= 100_000
    with (tmp_path / "sparse").open("wb") as f:  # as Kafka preallocates its index files
        f.truncate(50_000_000)
    assert disk_bytes(tmp_path) < blocks + 1_000_000
    assert disk_bytes(tmp_path / "absent") == 0


def test_a_sample_sums_the_live_workers_only(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    (tmp_path / "seg").write_bytes(b"0" * 10)
    s = sample(3.04, [os.getpid(), child.pid], tmp_path, tmp_path / "none")
    assert (s.at, s.workers, s.broker_disk, s.checkpoint_disk) == (3.0, 1, disk_bytes(tmp_path), 0)
    assert s.rss_sum == s.rss_max > 0


def test_the_job_s_internal_topics_are_told_apart_by_their_partition_directories(
    tmp_path: Path,
) -> None:
    for name in ("kstream.j.control-0", "kstream.j.s1-3", "kstream.jj.s1-0", "in-0"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "00.log").write_bytes(os.urandom(8192))
    s = sample(0.0, [], tmp_path, tmp_path / "none", internal="kstream.j.")
    mine = disk_bytes(tmp_path / "kstream.j.control-0") + disk_bytes(tmp_path / "kstream.j.s1-3")
    assert s.internal_disk == mine > 0
    assert s.broker_disk > s.internal_disk


def test_the_report_gives_first_largest_and_last_in_mb() -> None:
    mb = 1024 * 1024
    samples = (
        ResourceSample(0.0, 2, 100 * mb, 60 * mb, 5 * mb, 1 * mb),
        ResourceSample(10.0, 2, 140 * mb, 80 * mb, 9 * mb, 2 * mb),
        ResourceSample(20.0, 1, 90 * mb, 90 * mb, 7 * mb, 2 * mb),
    )
    report = resources_json(samples)
    assert report["workers_rss_sum_mb"] == {"first": 100.0, "max": 140.0, "last": 90.0}
    assert report["workers_rss_max_mb"] == {"first": 60.0, "max": 90.0, "last": 90.0}
    assert report["broker_disk_mb"] == {"first": 5.0, "max": 9.0, "last": 7.0}
    assert len(report["samples"]) == 3
    assert resources_json(())["samples"] == []
