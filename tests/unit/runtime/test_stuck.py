"""The watchdog of calls that do not return (`kstream.runtime.worker.stuck`), on a real thread."""

from __future__ import annotations

import threading
import time

from kstream.runtime.worker.stuck import CallWatch, StuckCall


class Task:
    id = "s0-1"

    def current_record(self) -> str:
        return "in[1]@150"


def wait_for(watch: CallWatch, timeout: float) -> StuckCall | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stuck = watch.stuck()
        if stuck is not None:
            return stuck
        time.sleep(0.05)  # the watchdog samples on its own thread
    return None


def test_a_call_of_the_job_that_does_not_return_is_named_with_its_record_and_stack() -> None:
    watch = CallWatch(threshold=1.0)
    release = threading.Event()
    found: list[StuckCall | None] = []

    def loop() -> None:  # stands for the worker's loop: kstream's frames are above it
        watch.start()
        watch.task = Task()
        work("stuck", 3)
        watch.task = None

    def work(line: str, n: int) -> None:
        found.append(wait_for(watch, 30.0))
        release.wait()

    main = threading.Thread(target=loop)
    main.start()
    try:
        while not found:
            time.sleep(0.05)
    finally:
        release.set()
        main.join()
        watch.stop()
    stuck = found[0]
    assert stuck is not None
    assert stuck.on == (
        "s0-1: test_a_call_of_the_job_that_does_not_return_is_named_with_its_record_and_stack"
        ".<locals>.work() on ('stuck', 3) from in[1]@150"
    )
    assert stuck.line.startswith(
        "s0-1: test_a_call_of_the_job_that_does_not_return_is_named_with_its_record_and_stack"
        ".<locals>.work() (test_stuck.py:"
    )
    assert ") has not returned for 1s on ('stuck', 3) from in[1]@150; stuck at " in stuck.line


def test_calls_that_return_are_never_stuck_however_long_the_poll() -> None:
    watch = CallWatch(threshold=0.5)
    watch.start()
    watch.task = Task()

    def quick() -> None:
        time.sleep(0.01)

    try:
        deadline = time.monotonic() + 2.5  # several thresholds of short calls
        while time.monotonic() < deadline:
            quick()
        assert watch.stuck() is None
    finally:
        watch.task = None
        watch.stop()
