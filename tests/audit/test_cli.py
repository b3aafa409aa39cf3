"""`kstream audit` as a user runs it: a real process, its exit code and its output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from wordcount_data import by_partition, running_counts

from kstream.infra.admin import Admin
from kstream.testing import produce, unique_name

pytestmark = pytest.mark.audit

LINES = ["to be or not to be", "that is the question", "to\tbe\u3000sure"]
#: Spark's start-up dominates; a whole audit of a few records takes well under this.
AUDIT_TIMEOUT_S = 300
#: An unreachable cluster must be reported within the audit's connect timeout (10 s).
FAIL_FAST_TIMEOUT_S = 60


def kstream_audit(*args: str, timeout: float = AUDIT_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kstream", "audit", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def topics(bootstrap: str, admin: Admin, topic: str) -> tuple[str, str]:
    src, dst = f"{topic}-in", f"{topic}-out"
    admin.create_topics({src: 1, dst: 2})
    produce(bootstrap, src, [(None, s.encode()) for s in LINES], transactional_id=unique_name("t"))
    for p, records in by_partition(running_counts(LINES), 2).items():
        produce(bootstrap, dst, records, partition=p, transactional_id=unique_name("t"))
    return src, dst


def test_clean_output_exits_0(bootstrap: str, topics: tuple[str, str], tmp_path: Path) -> None:
    src, dst = topics
    done = kstream_audit(
        "--input", src, "--output", dst, "--bootstrap-servers", bootstrap,
        "--master", "local[1]", "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("clean (running-count)")
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "clean"
    assert (tmp_path / "report.html").is_file()


def test_violations_exit_1_with_the_verdict_on_stdout(
    bootstrap: str, topics: tuple[str, str], tmp_path: Path
) -> None:
    src, dst = topics
    produce(bootstrap, dst, [(b"to", b"1")], partition=0, transactional_id=unique_name("t"))
    done = kstream_audit(
        "--input", src, "--output", dst, "--bootstrap-servers", bootstrap,
        "--check", "running-count", "--master", "local[1]", "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("VIOLATIONS (running-count)")
    assert "duplicates=1 lost=0 unexpected=0 out_of_order=0" in done.stdout
    assert "kstream: error" not in done.stderr


def test_missing_topic_exits_2_with_one_line(bootstrap: str, tmp_path: Path) -> None:
    missing = unique_name("missing")
    done = kstream_audit(
        "--input", missing, "--output", missing, "--bootstrap-servers", bootstrap,
        "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"kstream: error: topic {missing} does not exist on {bootstrap}"
    ]


def test_unreachable_cluster_exits_2_with_one_line(tmp_path: Path) -> None:
    # Port 9 (discard) is closed on this host: nothing answers there.
    done = kstream_audit(
        "--input", "a", "--output", "b", "--bootstrap-servers", "127.0.0.1:9",
        "--report-dir", str(tmp_path), timeout=FAIL_FAST_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("kstream: error: Kafka at 127.0.0.1:9 did not answer")


def test_unknown_check_is_a_usage_error() -> None:
    done = kstream_audit("--input", "a", "--output", "b", "--check", "vibes", timeout=30)
    assert done.returncode == 2
    assert "vibes" in done.stderr


def test_without_pyspark_exits_2_naming_the_extra(tmp_path: Path) -> None:
    # Make `pyspark` look uninstalled to this process only.
    code = (
        "import sys, importlib.metadata as m\n"
        "real = m.version\n"
        "def version(name):\n"
        "    if name == 'pyspark':\n"
        "        raise m.PackageNotFoundError(name)\n"
        "    return real(name)\n"
        "m.version = version\n"
        "from kstream.tools.cli import main\n"
        "sys.argv = ['kstream', 'audit', '--input', 'a', '--output', 'b',\n"
        "            '--bootstrap-servers', '127.0.0.1:9', '--report-dir', sys.argv[1]]\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=FAIL_FAST_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kstream: error: the audit needs pyspark, which is not installed: "
        "pip install 'kstream[audit]'"
    ]
