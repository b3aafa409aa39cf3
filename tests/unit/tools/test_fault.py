"""`kstream.tools.fault`: parsing ``KSTREAM_FAULT`` and dying where it says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from kstream.errors import ConfigurationError
from kstream.tools import fault
from kstream.tools.fault import POINTS, Faults

EVERY_POINT = "aligning, committed, completed-before-commit, pre-committed, snapshotting"


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
    assert Faults.from_env() == Faults()


def test_only_an_armed_point_and_checkpoint_kills_the_process() -> None:
    code = (
        "from kstream.tools.fault import Faults\n"
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
