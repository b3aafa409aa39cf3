"""`kstream.runtime.worker.faults`: parsing ``KSTREAM_FAULT`` and dying where it says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kstream.errors import ConfigurationError
from kstream.runtime.worker import faults as fault
from kstream.runtime.worker.faults import POINTS, FaultFile, Faults

EVERY_POINT = (
    "aligning, committed, completed-before-commit, overflowed, pre-committed, recording, "
    "snapshotting"
)


def test_nothing_is_armed_by_default() -> None:
    assert Faults.parse("") == Faults()
    assert Faults().at == frozenset()


def test_items_are_point_at_checkpoint_separated_by_commas() -> None:
    faults = Faults.parse(" aligning@3 ,committed@10,,pre-committed@0, ")
    assert faults.at == {("aligning", 3), ("committed", 10), ("pre-committed", 0)}


def test_every_documented_point_parses() -> None:
    assert {p.strip() for p in EVERY_POINT.split(",")} == POINTS
    for point in POINTS:
        assert Faults.parse(f"{point}@1").at == {(point, 1)}
        assert f"``{point}``" in (fault.__doc__ or "")


@pytest.mark.parametrize(
    "item",
    [
        "aligning",
        "aligning@",
        "@3",
        "nowhere@3",
        "aligning@x",
        "aligning@-1",
        "aligning@1.5",
        "aligning@²",
    ],
)
def test_a_malformed_item_is_refused_with_the_points_listed(item: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        Faults.parse(f"committed@1,{item}")
    assert str(caught.value) == (
        f"KSTREAM_FAULT item {item!r} must be POINT@CHECKPOINT with POINT one of {EVERY_POINT}"
    )


def test_the_environment_variable_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KSTREAM_FAULT", "snapshotting@4")
    assert Faults.from_env().at == {("snapshotting", 4)}
    monkeypatch.delenv("KSTREAM_FAULT")
    monkeypatch.delenv("KSTREAM_FAULT_FILE", raising=False)
    assert Faults.from_env() == Faults()


def test_only_an_armed_point_and_checkpoint_kills_the_process() -> None:
    code = (
        "from kstream.runtime.worker.faults import Faults\n"
        "faults = Faults.from_env()\n"
        "faults.hit('committed', 1)\n"
        "faults.hit('aligning', 2)\n"
        "print('passed 1', flush=True)\n"
        "faults.hit('committed', 2)\n"
        "print('passed 2', flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "KSTREAM_FAULT": "committed@2"},
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL
    assert done.stdout == "passed 1\n"


def test_a_fault_file_arms_what_it_holds_now_and_nothing_when_missing_or_malformed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "armed"
    armed = FaultFile(path)
    assert armed.armed() == frozenset()
    path.write_text("aligning@3\n")
    assert armed.armed() == {("aligning", 3)}
    path.write_text("committed@12\npre-committed@13\n")  # rewritten: read again
    assert armed.armed() == {("committed", 12), ("pre-committed", 13)}
    path.write_text("committed@1")  # half-written (or wrong): arms nothing, kills nothing
    path.write_text("commi")
    assert armed.armed() == frozenset()
    path.unlink()
    assert armed.armed() == frozenset()


def test_a_point_armed_in_the_file_of_a_running_process_kills_it_and_says_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "armed"
    code = (
        "import sys\n"
        "from kstream.runtime.worker.faults import Faults\n"
        "faults = Faults.from_env()\n"
        "faults.hit('committed', 7)\n"
        "print('alive', flush=True)\n"
        "sys.stdin.readline()\n"  # the test arms the point meanwhile
        "faults.hit('aligning', 7)\n"
        "faults.hit('committed', 7)\n"
        "print('survived', flush=True)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "KSTREAM_FAULT_FILE": str(path)},
    )
    assert proc.stdout is not None
    assert proc.stdin is not None
    assert proc.stdout.readline() == "alive\n"
    path.write_text("committed@7\n")
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.wait(120) == -signal.SIGKILL
    assert proc.stdout.read() == ""
    assert (tmp_path / "armed.fired").read_text() == f"committed@7 {proc.pid}\n"
