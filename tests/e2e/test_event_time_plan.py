"""Event-time jobs that cannot do what they say are refused before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kstream.infra.admin import Admin
from kstream.protocol.names import dead_letter_topic
from kstream.testing import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

SLIDING = "kstream.examples.windowed_counts:job"


def kstream(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kstream", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_a_sliding_window_with_a_slide_longer_than_its_size_is_refused(
    bootstrap: str, tmp_path: Path
) -> None:
    """`sliding(1000, 5000)` would put 4 of every 5 seconds in no window: their
    records would be neither results nor late nor dead letters. `kstream plan`
    and `kstream run` refuse it in one line, and the run starts nothing."""
    src, dst, name = unique_name("slide-in"), unique_name("slide-out"), unique_name("slide")
    Admin(bootstrap).create_topics({src: 1, dst: 1, f"{dst}-late": 1})
    params = ["-p", f"input={src}", "-p", f"output={dst}", "-p", f"name={name}"]
    params += ["-p", "window=sliding", "-p", "size=1000", "-p", "slide=5000"]
    expected = (
        "kstream: error: sliding(1000, 5000): a slide longer than the window leaves 4000 ms "
        "of every 5000 in no window, and records there would be dropped unseen; use a slide "
        "<= the size (tumbling(size) for equal ones)"
    )
    plan = kstream("plan", SLIDING, *params, cwd=tmp_path)
    assert (plan.returncode, plan.stderr.strip()) == (2, expected), plan.stdout
    run = kstream(
        "run", SLIDING, *params, "--bootstrap-servers", bootstrap,
        "--state-dir", str(tmp_path / "state"), cwd=tmp_path,
    )  # fmt: skip
    assert (run.returncode, run.stderr.strip()) == (2, expected), run.stdout
    # Nothing of the job was created on the cluster.
    topics = Admin(bootstrap).topics()
    assert f"kstream.{name}.control" not in topics
    assert dead_letter_topic(name) not in topics
