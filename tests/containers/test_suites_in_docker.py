"""Existing suites, unchanged, against a Kafka container started by testcontainers.

Each group runs in a child pytest with ``KSTREAM_TEST_KAFKA=docker``: the root
conftest then starts the ``kstream/kafka`` image (`kafka_container`, host network,
a free port, labelled with this suite's label) and the tests run against it as they
do against the local broker. Tests that restart their broker skip there (only the
local broker is the suite's to kill).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from netns import free_port

pytestmark = pytest.mark.containers

ROOT = Path(__file__).resolve().parents[2]
#: name -> the pytest arguments of the group (paths, selections).
GROUPS = {
    # The word count with SIGKILLed workers, checked exactly-once.
    "wordcount-sigkill": ["tests/e2e/test_wordcount_recovery.py"],
    # Transactional (two-phase commit) sinks: prepare, commit, abort, fencing, purged recovery.
    "two-phase-commit": [
        "tests/integration/test_transactional_sink.py",
        "tests/e2e/test_purged_sink_recovery.py",
    ],
    # Spark reading real topics read_committed: clean output, and duplicates and
    # losses counted exactly. Three of the audit's tests, not all 21: each starts
    # Spark (~30 s here) and the default suite runs them all on the local broker.
    "audit": [
        "tests/audit/test_audit_topics.py",
        "-k",
        "clean or duplicates or dropped",
    ],
}
#: A group gives up after this long.
GROUP_TIMEOUT_S = 600


#: pytest's closing line: '3 passed, 1 skipped in 9.1s' (with -q), framed by '=' without.
CLOSING_LINE = re.compile(r"^=*\s*(\d+ \w+(, )?)+ in [\d.]+s")


def _summary(stdout: str) -> dict[str, int]:
    """Counts from pytest's closing line in `stdout` (librdkafka's logs go to stderr)."""
    lines = [line for line in stdout.splitlines() if CLOSING_LINE.match(line)]
    if not lines:
        return {}
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", lines[-1].split(" in ")[0])}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_group_against_a_kafka_container(group: str) -> None:
    port = free_port("127.0.0.1")  # and port+1, the controller's
    env = {k: v for k, v in os.environ.items() if k != "KSTREAM_BOOTSTRAP"}
    env |= {
        "KSTREAM_TEST_KAFKA": "docker",
        "KSTREAM_TEST_BROKER_PORT": str(port),
        "TESTCONTAINERS_RYUK_DISABLED": "true",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *GROUPS[group]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=GROUP_TIMEOUT_S,
        check=False,
    )
    output = done.stdout + done.stderr
    tail = "\n".join(output.splitlines()[-60:])
    assert done.returncode == 0, f"{group} failed against the Kafka container:\n{tail}"
    counts = _summary(done.stdout)
    assert counts.get("passed", 0) > 0, f"{group} ran no test:\n{tail}"
    assert counts.get("failed", 0) == 0, tail
