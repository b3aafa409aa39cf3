"""The audit's progress display mirrors Spark's running stages."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

from kstream.audit.progress import StageProgress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.audit

#: Bound on waiting for the display to show a stage; it polls every 0.25 s.
SHOW_TIMEOUT_S = 60.0


def _release(fifo: str) -> bool:
    """Let the blocked task finish; False if it never opened the FIFO in time."""

    def write() -> None:
        with open(fifo, "w") as f:  # blocks until the task has opened the FIFO
            f.write("go")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(SHOW_TIMEOUT_S)
    if not writer.is_alive():
        return True
    # Open the reading end ourselves so the writer thread can finish, then fail.
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer.join()
    os.close(fd)
    return False


def test_running_stage_is_shown_with_its_tasks(spark: SparkSession, tmp_path: Path) -> None:
    fifo = str(tmp_path / "release")
    os.mkfifo(fifo)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)

    def block_on(path: str) -> int:
        # Opening a FIFO for reading blocks until a writer opens it: the task runs
        # until the test lets it finish, with no timing involved. (A nested
        # function travels to Spark's Python worker by value; the test module
        # is not importable there.)
        with open(path) as f:
            return len(f.read())

    rdd = spark.sparkContext.parallelize([fifo], 1).map(block_on)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            rdd.collect()
        except BaseException as exc:
            failures.append(exc)

    with StageProgress(console=console) as bar:
        bar.step("checking")
        bar.watch(spark.sparkContext)
        job = threading.Thread(target=run)
        job.start()
        try:
            deadline = time.monotonic() + SHOW_TIMEOUT_S
            while "stage" not in out.getvalue() and not failures and time.monotonic() < deadline:
                threading.Event().wait(0.05)  # the display refreshes on its own thread
            shown = out.getvalue()
        finally:
            released = _release(fifo)
            job.join(SHOW_TIMEOUT_S)
    assert released, "the task never opened its FIFO"
    assert not job.is_alive()
    assert not failures
    assert "checking" in shown
    assert "stage" in shown
    assert "0/1" in shown  # one task, not yet done


def test_disabled_progress_writes_nothing() -> None:
    out = io.StringIO()
    with StageProgress(enabled=False, console=Console(file=out, force_terminal=True)) as bar:
        bar.step("quiet")
    assert out.getvalue() == ""
