"""An idle job is checkpointed rarely, and wakes up for its next record
({ref}`coordinator-idle`).

The idle interval here is an hour: once the job counts as idle, output
committed at all proves that the first record after the pause woke the
coordinator (otherwise it would wait for the hour's checkpoint). Twice, so a
job goes idle again after working.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest
from test_cli_run import wait_for

from kstream.examples.wordcount import job
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

SPEC = "kstream.examples.wordcount:job"
HOUR = 3600.0


def test_an_idle_job_wakes_for_the_next_record(bootstrap: str, tmp_path: Path) -> None:
    run = unique_name("idle")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    params = {"input": src, "output": dst, "name": f"idle-{run}"}
    config = CoordinatorConfig(interval=0.3, timeout=60.0, idle_after=3, idle_interval=HOUR)
    r = Runner(
        RunConfig(JobRef(SPEC, params), bootstrap, 2, tmp_path / "state", checkpoints=config),
        job(params),
        say=lambda _: None,
    )
    r.prepare()
    running = r.start()
    try:
        coordinator = running.coordinator

        def step_until(what: str, done: object) -> None:
            def stepped() -> bool:
                running.step()
                return bool(done())  # type: ignore[operator]

            wait_for(stepped, 120, what)

        sent: Counter[str] = Counter()
        for round_ in range(2):
            step_until(f"the job to be idle ({round_})", lambda: coordinator.idle)
            completed = r.stats.completed
            # Idle: no checkpoint for an hour unless something wakes the coordinator.
            last = coordinator.last_trigger or 0.0
            assert coordinator.next_trigger_in(last) == pytest.approx(HOUR)
            words = [f"w{round_} x{round_}"] * 3
            produce(bootstrap, src, [(None, w.encode()) for w in words])
            sent.update(" ".join(words).split())

            counted = functools.partial(committed_counts_are, bootstrap, dst, dict(sent))
            step_until(f"round {round_}'s counts committed", counted)
            assert r.stats.completed > completed
    finally:
        running.stop()


def committed_counts_are(bootstrap: str, topic: str, want: dict[str, int]) -> bool:
    """Whether the newest committed count of every word in `topic` is `want`'s."""
    got = {(rec.key or b"").decode(): int(rec.value or b"0") for rec in read_all(bootstrap, topic)}
    return got == want
