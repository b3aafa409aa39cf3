"""A worker's own failure reaches the runner's console in one line, with its cause, and
a failure that would repeat on every restart stops the job at once instead of being
retried `MAX_RESTARTS` times.

Each test runs `kstream run` as a user does (real worker processes, the real broker)
on a job whose worker fails in one particular way, and reads what the runner says.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli_run import kstream, wait_for

from kstream.infra.admin import Admin
from kstream.runtime.control import read_history
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: A job whose user functions fail as `-p mode=` says, on the record "x50" only.
FAILING_JOB = """
import os
import sys

from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource

if os.environ.get("KSTREAM_RUNNER_PID") and os.environ.get("FAIL_IMPORT_IN_WORKERS"):
    import no_such_module_in_workers  # the runner imports this file fine; workers do not

MODE = {}


def explode(line):
    mode = MODE["mode"]
    if line == "x50":
        if mode == "sys.exit":
            sys.exit(3)
        if mode == "os._exit":
            os._exit(5)
        if mode == "interrupt":
            raise KeyboardInterrupt
    return [line]


def remember(word, _, state):
    state.set(object() if MODE["mode"] == "state" and word == "x50" else 1)
    yield word, 1


def job(params):
    MODE["mode"] = params.get("mode", "")
    j = Job("failing")
    (j.source(KafkaSource(params["input"]))
        .flat_map(explode)
        .key_by(lambda w: w)
        .process(remember, name="remember")
        .sink(KafkaSink(params["output"])))
    return j
"""

#: Writes every record without a key (no key_by before the sink).
KEYLESS_JOB = """
from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource


def job(params):
    j = Job("keyless")
    j.source(KafkaSource(params["input"])).map(lambda v: v).sink(KafkaSink(params["output"]))
    return j
"""


def run_to_failure(
    bootstrap: str,
    tmp_path: Path,
    source: str,
    *args: str,
    env: dict[str, str] | None = None,
    output_config: dict[str, str] | None = None,
) -> tuple[str, str, int]:
    """Run a job on 100 records until `kstream run` exits by itself: (job name, stderr, code)."""
    admin = Admin(bootstrap)
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("fails")
    admin.create_topics({src: 1})
    admin.create_topics({dst: 1}, output_config)
    produce(bootstrap, src, [(None, f"x{i}".encode()) for i in range(100)])
    job_file = tmp_path / "failing.py"
    job_file.write_text(source)
    proc = kstream(
        "run", f"{job_file}:job", "-p", f"input={src}", "-p", f"output={dst}", *args,
        "--bootstrap-servers", bootstrap, "--workers", "1", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    try:
        _, stderr = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        raise AssertionError(f"kstream run did not stop by itself:\n{stderr}") from None
    return name, stderr, proc.returncode


def failed_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("kstream: failed:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("sys.exit", "called sys.exit(3)"),
        ("os._exit", "called os._exit(5)"),
        ("interrupt", "raised KeyboardInterrupt"),
    ],
)
def test_a_user_function_exiting_the_worker_fails_the_job_at_once_naming_it(
    bootstrap: str, tmp_path: Path, mode: str, said: str
) -> None:
    name, stderr, code = run_to_failure(bootstrap, tmp_path, FAILING_JOB, "-p", f"mode={mode}")
    assert code == 1, stderr
    line = failed_line(stderr)
    assert said in line
    assert "in explode" in line, line
    assert "failing.py" in line, line
    # Not retried: the first generation is the only one.
    assert "recovery:" not in stderr
    assert sum(m["type"] == "recover" for m in read_history(bootstrap, name)) == 1
    assert "Traceback" not in stderr
    if mode != "os._exit":  # which ends the process before it can send its counts
        assert "records: 100 read" in stderr


def test_a_state_value_its_serde_cannot_store_fails_the_job_at_once_counting_records(
    bootstrap: str, tmp_path: Path
) -> None:
    name, stderr, code = run_to_failure(bootstrap, tmp_path, FAILING_JOB, "-p", "mode=state")
    assert code == 1, stderr
    assert "its state serde cannot store" in failed_line(stderr)
    assert "recovery:" not in stderr
    assert sum(m["type"] == "recover" for m in read_history(bootstrap, name)) == 1
    # The worker read the records before it failed: the summary says so.
    assert "records: 0 read" not in stderr
    assert "records: 100 read" in stderr


def test_a_job_module_failing_to_import_in_the_workers_names_the_error_and_the_log(
    bootstrap: str, tmp_path: Path
) -> None:
    _, stderr, code = run_to_failure(
        bootstrap, tmp_path, FAILING_JOB, env={"FAIL_IMPORT_IN_WORKERS": "1"}
    )
    assert code == 1, stderr
    line = failed_line(stderr)
    assert "No module named 'no_such_module_in_workers'" in line
    assert "workers died" not in line
    log = Path(line.rpartition("see ")[2].rstrip(")"))
    assert log.is_file(), f"the log named does not exist: {line}"
    assert "no_such_module_in_workers" in log.read_text()


def test_keyless_records_for_a_compacted_output_fail_the_job_saying_why(
    bootstrap: str, tmp_path: Path
) -> None:
    _, stderr, code = run_to_failure(
        bootstrap, tmp_path, KEYLESS_JOB, output_config={"cleanup.policy": "compact"}
    )
    assert code == 1, stderr
    line = failed_line(stderr)
    assert "compacted topic refuses records without a key" in line
    assert "workers died" not in line


#: A module-spec job (``shadow_job:job``), run from a directory that also holds a
#: folder named ``kstream``.
MODULE_JOB = """
from kstream import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource


def job(params):
    j = Job("shadowed")
    j.source(KafkaSource(params["input"])).map(str.upper).sink(KafkaSink(params["output"]))
    return j
"""


def test_a_kstream_folder_in_the_current_directory_does_not_shadow_the_package(
    bootstrap: str, tmp_path: Path
) -> None:
    admin = Admin(bootstrap)
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("shadow")
    admin.create_topics({src: 1, dst: 1})
    produce(bootstrap, src, [(None, f"x{i}".encode()) for i in range(100)])
    (tmp_path / "kstream").mkdir()  # a clone of kstream next to the job, say
    (tmp_path / "shadow_job.py").write_text(MODULE_JOB)
    # The console script, as a user runs it (``python -m kstream`` would meet the folder
    # in the runner already, before kstream runs).
    script = Path(sys.executable).with_name("kstream")
    command = [
        str(script), "run", "shadow_job:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "1", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
    ]  # fmt: skip
    proc = subprocess.Popen(
        command,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            lambda: len(read_all(bootstrap, dst)) == 100 or proc.poll() is not None,
            120,
            "the job's output, or the runner's end",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert sorted(r.value for r in read_all(bootstrap, dst)) == sorted(
        f"X{i}".encode() for i in range(100)
    ), stderr
    assert "recovery:" not in stderr
    assert "cannot import name" not in stderr
