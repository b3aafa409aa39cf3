"""Rescaling: a job with keyed state (value, map, list, reducing) stopped and resumed
with other --workers, 2 -> 3 -> 1, the last step with a worker SIGKILLed; its
read_committed output equals a pure reference, record for record, as an
uninterrupted run's does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_keyed_state_recovery import JOB_FILE, PARTITIONS, user_lines

from kstream.errors import ConfigurationError
from kstream.infra.admin import Admin
from kstream.protocol.coordination import CoordinatorConfig
from kstream.protocol.names import dead_letter_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import Feeder, read_all, run_until_consumed, unique_name, wait_settled

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

LINES = 3_000


def runner(bootstrap: str, tmp_path: Path, params: dict[str, str], workers: int) -> Runner:
    from keyed_state_job import job

    return Runner(
        RunConfig(
            JobRef(f"{JOB_FILE}:job", params),
            bootstrap,
            workers,
            tmp_path / "state",
            checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
        ),
        job(params),
        say=lambda _: None,
    )


def test_keyed_state_rescaled_2_3_1_is_exactly_once(bootstrap: str, tmp_path: Path) -> None:
    from keyed_state_job import reference

    run = unique_name("rescale")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: PARTITIONS, dst: PARTITIONS})
    lines = user_lines(LINES, seed=17)
    params = {"input": src, "output": dst, "name": f"rs-{run}"}
    messages: list[str] = []
    # Slices start at multiples of PARTITIONS: line i stays in partition i % PARTITIONS.
    cuts = [0, 1_200, 2_100, LINES]
    for step, workers in enumerate([2, 3, 1]):
        part = [s.encode() for s in lines[cuts[step] : cuts[step + 1]]]
        feeder = Feeder(bootstrap, src, part, PARTITIONS, rate=None if step < 2 else 600.0)
        ends = {p: len(range(p, cuts[step + 1], PARTITIONS)) for p in range(PARTITIONS)}
        r = runner(bootstrap, tmp_path, params, workers)
        r.prepare()
        assert r.rescaled_from is not None or step == 0
        kills = run_until_consumed(
            r,
            src,
            ends,
            kills=1 if step == 2 else 0,
            seed=5,
            say=messages.append,
            chaos=lambda _, f=feeder: f.feed(),  # type: ignore[misc]
            timeout=300,
        )
        assert kills == (1 if step == 2 else 0), messages
    wait_settled(bootstrap, dst)
    got: dict[str, list[object]] = {}
    for rec in read_all(bootstrap, dst):
        got.setdefault((rec.key or b"").decode(), []).append(json.loads(rec.value or b"null"))
    expected = reference(lines)
    assert sorted(got) == sorted(expected)
    for user, summaries in expected.items():
        assert got[user] == summaries, user
    assert read_all(bootstrap, dead_letter_topic(params["name"])) == []


def test_more_workers_than_key_groups_are_refused_with_one_line(
    bootstrap: str, tmp_path: Path
) -> None:
    from keyed_state_job import job

    run = unique_name("rescale-k")
    params = {"input": f"{run}-in", "output": f"{run}-out", "name": f"rk-{run}"}
    with pytest.raises(ConfigurationError, match="more than its max parallelism 128"):
        Runner(
            RunConfig(JobRef(f"{JOB_FILE}:job", params), bootstrap, 129, tmp_path / "state"),
            job(params),
            say=lambda _: None,
        )


def test_windowed_counts_rescaled_2_to_3_are_the_reference(bootstrap: str, tmp_path: Path) -> None:
    from test_event_time_examples import (
        JOB_OOO_MS,
        late_set,
        outputs,
        padded,
        real,
        ref_late,
        shifted,
        topics,
        write,
    )

    from kstream.examples import inputs, references, windowed_counts

    run = unique_name("rescale-counts")
    src, dst, late = topics(bootstrap, run, "in", "out", "late")
    lateness = 1_500
    records = shifted(inputs.keyed_events(7, partitions=PARTITIONS, allowed_lateness=lateness))
    params = {
        "input": src,
        "output": dst,
        "late": late,
        "name": f"c-{run}",
        "window": "tumbling",
        "lateness": str(lateness),
        "ooo": str(JOB_OOO_MS),
    }
    spec = "kstream.examples.windowed_counts:job"
    half = len(records) // 2
    first = write(bootstrap, src, records[:half])
    rest = write(bootstrap, src, padded(records[half:], max(r[1] for r in records)))
    total = {p: first.get(p, 0) + rest.get(p, 0) for p in range(PARTITIONS)}
    messages: list[str] = []
    for workers, ends in ((2, first), (3, total)):
        r = Runner(
            RunConfig(
                JobRef(spec, params),
                bootstrap,
                workers,
                tmp_path / "state",
                checkpoints=CoordinatorConfig(interval=0.5, timeout=60.0),
            ),
            windowed_counts.job(params),
            say=messages.append,
        )
        r.prepare()
        run_until_consumed(r, src, ends, say=messages.append, timeout=300)
    assert any("rescaling from parallelism [2, 2] to [3, 3]" in m for m in messages), messages
    ref = references.windowed_counts(
        records, windowed_counts.assigner(params), JOB_OOO_MS, lateness
    )
    got = real(outputs(bootstrap, dst))
    assert references.final_results(got) == ref.results
    assert late_set(outputs(bootstrap, late)) == ref_late(ref.late)


def test_a_job_sigkilled_whole_is_rescaled_from_its_checkpoint_exactly_once(
    bootstrap: str, tmp_path: Path
) -> None:
    import os
    import signal

    from keyed_state_job import reference
    from test_cli_run import job_processes, kstream, wait_for

    from kstream.runtime.control import read_history

    run = unique_name("rescale-kill")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: PARTITIONS, dst: PARTITIONS})
    lines = user_lines(LINES, seed=23)
    params = {"input": src, "output": dst, "name": f"rk-{run}"}
    # A live stream at 2 workers, killed whole (runner and workers) mid-stream.
    feeder = Feeder(bootstrap, src, [s.encode() for s in lines], PARTITIONS, rate=1_000.0)
    args = [f"-p{k}={v}" for k, v in params.items()]
    first = kstream(
        "run", f"{JOB_FILE}:job", *args, "--workers", "2", "--checkpoint-interval", "0.5",
        "--bootstrap-servers", bootstrap, "--state-dir", str(tmp_path / "state"),
    )  # fmt: skip

    def completed_twice() -> bool:
        feeder.feed()
        if first.poll() is not None:
            raise AssertionError(first.communicate()[1])
        return sum(m["type"] == "complete" for m in read_history(bootstrap, params["name"])) >= 2

    try:
        wait_for(completed_twice, 120, "two completed checkpoints")
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
    for pid in job_processes(params["name"]):
        os.kill(pid, signal.SIGKILL)  # what a killed host takes with it
    wait_for(lambda: not job_processes(params["name"]), 60, "the workers to be gone")
    while feeder.sent < len(lines):
        feeder.feed()
    r = runner(bootstrap, tmp_path, params, 3)
    r.prepare()
    assert r.rescaled_from is not None
    ends = {p: len(range(p, LINES, PARTITIONS)) for p in range(PARTITIONS)}
    run_until_consumed(r, src, ends, timeout=300)
    wait_settled(bootstrap, dst)
    got: dict[str, list[object]] = {}
    for rec in read_all(bootstrap, dst):
        got.setdefault((rec.key or b"").decode(), []).append(json.loads(rec.value or b"null"))
    expected = reference(lines)
    assert sorted(got) == sorted(expected)
    for user, summaries in expected.items():
        assert got[user] == summaries, user
