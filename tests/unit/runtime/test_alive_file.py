"""`kstream.runtime.runner.alive`: the file a coordinator touches while its loop turns."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kstream.errors import ConfigurationError
from kstream.runtime.runner.alive import AliveFile, age


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_beat_creates_the_file_and_later_beats_are_rate_limited(tmp_path: Path) -> None:
    path, clock = tmp_path / "alive", Clock()
    alive = AliveFile(path, every=1.0, clock=clock)
    assert age(path) is None
    alive.beat()
    assert path.exists()
    # Set the file's time far back: a beat within `every` leaves it there...
    os.utime(path, (1_000.0, 1_000.0))
    clock.now += 0.5
    alive.beat()
    assert path.stat().st_mtime == 1_000.0
    # ...and the first beat after `every` brings it to now.
    clock.now += 0.6
    alive.beat()
    seconds = age(path)
    assert seconds is not None
    assert seconds < 60


def test_age_is_the_time_since_the_last_touch_never_negative(tmp_path: Path) -> None:
    path = tmp_path / "alive"
    path.touch()
    os.utime(path, (5_000.0, 5_000.0))
    assert age(path, now=5_042.5) == 42.5
    assert age(path, now=4_000.0) == 0.0  # a clock step back is not a negative age


def test_clear_removes_the_file_and_tolerates_a_missing_one(tmp_path: Path) -> None:
    path = tmp_path / "alive"
    alive = AliveFile(path)
    alive.beat()
    alive.clear()
    assert not path.exists()
    alive.clear()


def test_a_missing_directory_is_refused_at_once_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"directory .*no-such-dir does not exist"):
        AliveFile(tmp_path / "no-such-dir" / "alive")


def test_an_unwritable_file_is_refused_at_the_first_beat_in_one_line(tmp_path: Path) -> None:
    directory = tmp_path / "gone"
    directory.mkdir()
    alive = AliveFile(directory / "alive")
    directory.rmdir()
    with pytest.raises(ConfigurationError, match=r"cannot touch the liveness file .*gone"):
        alive.beat()


@pytest.mark.parametrize("every", [0.0, -1.0, float("nan")])
def test_a_non_positive_interval_is_refused(tmp_path: Path, every: float) -> None:
    with pytest.raises(ConfigurationError, match="interval must be > 0"):
        AliveFile(tmp_path / "alive", every=every)
