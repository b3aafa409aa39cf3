"""Rescaling, with read_committed output checked against a pure reference, record
for record, as an uninterrupted run's is:

* a job with keyed state (value, map, list, reducing) stopped and resumed with
  other --workers, 2 -> 3 -> 1, the last step with a worker SIGKILLed, and one
  SIGKILLed whole and resumed at 3 workers from its latest checkpoint;
* the word count and the windowed counts moved by savepoints taken mid-stream
  (`kstream savepoint --stop`, `kstream run --from-savepoint --workers K`), 2 -> 5
  (2 -> 5 -> 1 in the extended tier), fed between and during the steps, then
  SIGKILLed whole and resumed at 3 workers from their latest checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from job_runs import Drip, run_cli, runner, sigkill_whole, stop_with_savepoint, wait_running
from test_keyed_state_recovery import JOB_FILE, PARTITIONS, user_lines

from kstream.errors import ConfigurationError
from kstream.infra.admin import Admin
from kstream.protocol.names import dead_letter_topic
from kstream.runtime.config import JobRef, RunConfig
from kstream.runtime.runner.runner import Runner
from kstream.testing import Feeder, read_all, run_until_consumed, unique_name, wait_settled

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

LINES = 3_000


def keyed_runner(bootstrap: str, tmp_path: Path, params: dict[str, str], workers: int) -> Runner:
    from keyed_state_job import job

    return runner(bootstrap, tmp_path / "state", f"{JOB_FILE}:job", job(params), params, workers)


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
        r = keyed_runner(bootstrap, tmp_path, params, workers)
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
        tumbling_params,
        write,
    )

    from kstream.examples import inputs, references, windowed_counts

    run = unique_name("rescale-counts")
    src, dst, late = topics(bootstrap, run, "in", "out", "late")
    lateness = 1_500
    records = shifted(inputs.keyed_events(7, partitions=PARTITIONS, allowed_lateness=lateness))
    params = tumbling_params(src, dst, late, f"c-{run}", lateness)
    spec = "kstream.examples.windowed_counts:job"
    half = len(records) // 2
    first = write(bootstrap, src, records[:half])
    rest = write(bootstrap, src, padded(records[half:], max(r[1] for r in records)))
    total = {p: first.get(p, 0) + rest.get(p, 0) for p in range(PARTITIONS)}
    messages: list[str] = []
    for workers, ends in ((2, first), (3, total)):
        job = windowed_counts.job(params)
        r = runner(bootstrap, tmp_path / "state", spec, job, params, workers, messages.append)
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
    from keyed_state_job import assert_matches, reference
    from test_cli_run import wait_for

    from kstream.runtime.control import read_history

    run = unique_name("rescale-kill")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: PARTITIONS, dst: PARTITIONS})
    lines = user_lines(LINES, seed=23)
    params = {"input": src, "output": dst, "name": f"rk-{run}"}
    # A live stream at 2 workers, killed whole (runner and workers) mid-stream.
    feeder = Feeder(bootstrap, src, [s.encode() for s in lines], PARTITIONS, rate=1_000.0)
    state = tmp_path / "state"
    first = run_cli(
        bootstrap, f"{JOB_FILE}:job", params, name=params["name"], workers=2, state=state
    )

    def completed_twice() -> bool:
        feeder.feed()
        if first.poll() is not None:
            raise AssertionError(first.communicate()[1])
        return sum(m["type"] == "complete" for m in read_history(bootstrap, params["name"])) >= 2

    try:
        wait_for(completed_twice, 120, "two completed checkpoints")
    finally:
        sigkill_whole(first, params["name"])
    while feeder.sent < len(lines):
        feeder.feed()
    r = keyed_runner(bootstrap, tmp_path, params, 3)
    r.prepare()
    assert r.rescaled_from is not None
    ends = {p: len(range(p, LINES, PARTITIONS)) for p in range(PARTITIONS)}
    run_until_consumed(r, src, ends, timeout=300)
    wait_settled(bootstrap, dst)
    got: dict[str, list[object]] = {}
    for rec in read_all(bootstrap, dst):
        got.setdefault((rec.key or b"").decode(), []).append(json.loads(rec.value or b"null"))
    history = [
        (m["type"], m.get("checkpoint"), m.get("generation"))
        for m in read_history(bootstrap, params["name"])
        if m["type"] not in ("heartbeat", "presence")
    ]
    logs = "\n".join(
        f"{log.name}: {log.read_text()[-4000:]}"
        for log in sorted((state / params["name"] / "logs").glob("*.log"))
    )
    dead = len(read_all(bootstrap, dead_letter_topic(params["name"])))
    assert_matches(got, reference(lines), f"dead letters {dead}; control: {history}\n{logs}")


# -- rescaled by savepoints (2 -> 5 -> 1), then from a checkpoint after SIGKILL ---------


def completed(bootstrap: str, name: str) -> int:
    from kstream.runtime.control import read_history

    return sum(m["type"] == "complete" for m in read_history(bootstrap, name))


def rescale_steps(
    bootstrap: str,
    spec: str,
    params: dict[str, str],
    state: Path,
    sequence: list[int],
    drip: Drip,
    caught_up: Callable[[], bool],
) -> None:
    """Run the job at each parallelism of `sequence`, the first fresh, each next
    from a savepoint of the one before (`kstream savepoint --stop`, then `kstream
    run --from-savepoint URL --workers K` under a new name); SIGKILL the last run
    whole once it completed two checkpoints, and resume that name at 3 workers
    from its latest checkpoint until `caught_up` and a checkpoint of the resumed
    run completed. `drip` (of ``2 * (len(sequence) + 1)`` slices) is fed a slice
    while each run is down and another while it runs."""
    from test_job_safety import stop

    assert drip.slices == 2 * (len(sequence) + 1)
    url = ""
    names = [f"{params['name']}-{i}" for i in range(len(sequence))]
    for step, workers in enumerate(sequence):
        drip.feed_to(2 * step + 1)
        extra = ("--from-savepoint", url) if url else ()
        name = names[step]
        run = run_cli(bootstrap, spec, params, name=name, workers=workers, state=state, extra=extra)
        last = step == len(sequence) - 1

        def step_done(i: int = step, n: str = name, wanted: int = 2 if last else 1) -> bool:
            drip.feed_to(2 * i + 2)
            return completed(bootstrap, n) >= wanted

        wait_running(run, step_done, f"step {step} at {workers} workers")
        if last:
            sigkill_whole(run, name)
        else:
            # Taken mid-stream: the slice fed during the step may be in flight.
            url = stop_with_savepoint(bootstrap, name, run)
            info = json.loads((Path(urlsplit(url).path) / "savepoint.json").read_text())
            assert info["parallelism"] == [workers, workers]
    drip.feed_to(drip.slices - 1)  # while the job is down
    before = completed(bootstrap, names[-1])
    run = run_cli(bootstrap, spec, params, name=names[-1], workers=3, state=state)

    def finished() -> bool:
        drip.feed_to(drip.slices)
        return completed(bootstrap, names[-1]) > before and caught_up()

    wait_running(run, finished, "the job resumed at 3 workers to catch up")
    stderr = stop(run)
    assert f"rescaling from parallelism [{sequence[-1]}, {sequence[-1]}] to [3, 3]" in stderr


#: The default tier's sequence takes one savepoint mid-stream (2 -> 5), the
#: extended tier's the whole 2 -> 5 -> 1 (twice the savepoints, 1 minute a job).
SEQUENCES = [
    pytest.param([2, 5], id="2-5"),
    pytest.param([2, 5, 1], id="2-5-1", marks=pytest.mark.extended),
]


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_word_count_rescaled_by_savepoints_then_to_3_after_sigkill_is_exactly_once(
    bootstrap: str, tmp_path: Path, sequence: list[int]
) -> None:
    from test_job_safety import JOB_FILE as WORDCOUNT
    from test_job_safety import assert_exactly_once, caught_up, truth
    from test_job_safety import lines as text

    run = unique_name("rescale-wc")
    src, dst = f"{run}-in", f"{run}-out"
    Admin(bootstrap).create_topics({src: PARTITIONS, dst: PARTITIONS})
    job_file = tmp_path / "wc.py"
    job_file.write_text(WORDCOUNT)
    lines = text(3_000)
    rows = [(i % PARTITIONS, None, line.encode()) for i, line in enumerate(lines)]
    rescale_steps(
        bootstrap,
        f"{job_file}:job",
        {"input": src, "output": dst, "name": f"wc-{run}"},
        tmp_path / "state",
        sequence,
        Drip(bootstrap, src, rows, slices=2 * (len(sequence) + 1)),
        lambda: caught_up(bootstrap, dst, truth(lines)),
    )
    # Every word's counts 1..N once each, read_committed: an uninterrupted run's output.
    assert_exactly_once(bootstrap, dst, truth(lines))


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_windowed_counts_rescaled_by_savepoints_then_to_3_after_sigkill_are_the_reference(
    bootstrap: str, tmp_path: Path, sequence: list[int]
) -> None:
    from test_event_time_examples import (
        JOB_OOO_MS,
        late_set,
        outputs,
        padded,
        real,
        ref_late,
        shifted,
        topics,
        tumbling_params,
    )

    from kstream.examples import inputs, references, windowed_counts

    run = unique_name("rescale-win")
    src, dst, late = topics(bootstrap, run, "in", "out", "late")
    lateness = 1_500
    records = shifted(
        inputs.keyed_events(11, partitions=PARTITIONS, count=900, allowed_lateness=lateness)
    )
    # Slices are fed while a step runs and while it is down: no partition may go
    # idle for lack of input while the others go on.
    params = tumbling_params(src, dst, late, f"w-{run}", lateness, idle="600000")
    ref = references.windowed_counts(
        records, windowed_counts.assigner(params), JOB_OOO_MS, lateness
    )
    padded_records = padded(records, max(r[1] for r in records))

    def caught_up() -> bool:
        got = [json.loads(r.value or b"null") for r in read_all(bootstrap, dst)]
        return references.final_results(real(got)) == ref.results

    try:
        rescale_steps(
            bootstrap,
            "kstream.examples.windowed_counts:job",
            params,
            tmp_path / "state",
            sequence,
            Drip.events(bootstrap, src, padded_records, slices=2 * (len(sequence) + 1)),
            caught_up,
        )
    except AssertionError as exc:
        # Slow, or wrong: say which, with the first results that differ.
        got = references.final_results(real(outputs(bootstrap, dst)))
        wrong = {k: (v, ref.results.get(k)) for k, v in got.items() if ref.results.get(k) != v}
        missing = sorted(set(ref.results) - set(got))[:10]
        raise AssertionError(
            f"(got, expected) {sorted(wrong.items())[:10]}; missing {missing}\n{exc}"
        ) from None
    assert references.final_results(real(outputs(bootstrap, dst))) == ref.results
    assert late_set(outputs(bootstrap, late)) == ref_late(ref.late)
