"""Ordinary mistakes on the command line: one clear line on stderr, exit 2, no traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from test_cli_run import JOB_FILE, kstream, wait_for, worker_processes

from kstream.infra.admin import Admin
from kstream.runtime.control import read_history
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: The `kstream` console script of this environment (not `python -m kstream`, which
#: puts the current directory on the import path by itself).
KSTREAM_SCRIPT = str(Path(sys.executable).with_name("kstream"))


def one_line_error(proc: subprocess.Popen[str]) -> str:
    """The single stderr line of a command that must fail with exit code 2."""
    _, stderr = proc.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({"bad.py": "def job(params:\n"}, ["bad.py:job"], "job file bad.py: SyntaxError at "),
        ({"bad.py": "def job(params:\n"}, ["bad:job"], "module 'bad': SyntaxError at "),
        (
            {"imports.py": "import no_such_module_xyz\n"},
            ["imports:job"],
            "module 'imports' failed to import: ModuleNotFoundError: No module named "
            "'no_such_module_xyz'",
        ),
        (
            {"myjob.py": JOB_FILE},
            ["myjob.py:job"],
            "myjob.py:job: the job needs parameter 'input': pass it with -p input=VALUE",
        ),
        (
            {"noargs.py": "def job():\n    pass\n"},
            ["noargs.py:job"],
            "noargs.py:job must take one argument, the -p parameters as a dict",
        ),
        (
            {},
            ["kstream.examples.wordcount:job", "--checkpoint-interval", "nan"],
            "--checkpoint-interval must be a finite number > 0, got nan",
        ),
        (
            {},
            [
                "kstream.examples.wordcount:job",
                "-p",
                "input={input}",
                "-p",
                "output={output}",
                "--workers",
                "110",
            ],
            "--workers 110 needs 12,212 partitions for the job's internal topics",
        ),
        (
            {},
            [
                "kstream.examples.wordcount:job",
                "-p",
                "input={input}",
                "-p",
                "output={output}",
                "--workers",
                "200",
            ],
            "would run 200 subtasks (--workers 200), more than its max parallelism 128",
        ),
        (
            {},
            ["kstream.examples.wordcount:job", "-p", "input=a", "-p", "output=b", "-p", "input=c"],
            "kstream: error: parameter 'input' is given twice (-p input=a and -p input=c): "
            "give each parameter once",
        ),
        (
            {},
            [
                "kstream.examples.seed_ring:token_ring",
                "-p",
                "p-input=x",
                "-p",
                "q-input=y",
                "--concurrent",
            ],
            "concurrent snapshots need --alignment unaligned",
        ),
    ],
    ids=[
        "syntax-file",
        "syntax-module",
        "import-error",
        "missing-param",
        "signature",
        "nan",
        "too-many-partitions",
        "above-max-parallelism",
        "param-twice",
        "concurrent-aligned",
    ],
)
def test_mistakes_in_kstream_run_are_one_line(
    bootstrap: str, tmp_path: Path, files: dict[str, str], args: list[str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    if any("{input}" in a for a in args):
        topic, output = unique_name("in"), unique_name("out")
        Admin(bootstrap).create_topics({topic: 2, output: 2})
        args = [a.replace("{input}", topic).replace("{output}", output) for a in args]
    proc = kstream(
        "run", *args, "--bootstrap-servers", bootstrap, "--state-dir", str(tmp_path / "state"),
        cwd=tmp_path,
    )  # fmt: skip
    assert message in one_line_error(proc)


def test_an_empty_bootstrap_is_refused_not_replaced_by_the_local_broker(tmp_path: Path) -> None:
    for command in (["run", "kstream.examples.wordcount:job"], ["checkpoints", "--job-name", "x"]):
        proc = kstream(*command, "--bootstrap-servers", "", cwd=tmp_path)
        assert "--bootstrap-servers is empty" in one_line_error(proc)


def test_checkpoints_of_an_unreachable_cluster_is_one_line() -> None:
    proc = kstream("checkpoints", "--job-name", "x", "--bootstrap-servers", "127.0.0.1:9")
    assert one_line_error(proc) == (
        "kstream: error: Kafka at 127.0.0.1:9 did not answer (127.0.0.1:9: Connection refused)"
    )


#: A job that reads its own output on purpose: it marks each line once and skips marked ones.
MARKING_JOB = """
from kstream.dataflow.job import Job
from kstream.connectors.kafka import KafkaSink, KafkaSource


def job(params):
    j = Job("marking")
    (j.source(KafkaSource(params["input"]))
        .filter(lambda line: not line.startswith("seen "))
        .map(lambda line: "seen " + line)
        .sink(KafkaSink(params["output"])))
    return j
"""


def test_an_output_topic_that_is_the_input_is_refused_unless_allowed(
    bootstrap: str, tmp_path: Path
) -> None:
    topic, name = unique_name("loop"), unique_name("feedback")
    Admin(bootstrap).create_topics({topic: 2})
    lines = [f"line {i}" for i in range(10)]
    produce(bootstrap, topic, [(None, line.encode()) for line in lines])
    (tmp_path / "marking.py").write_text(MARKING_JOB)
    common = ["-p", f"input={topic}", "-p", f"output={topic}", "--job-name", name,
              "--bootstrap-servers", bootstrap, "--state-dir", str(tmp_path / "state"),
              "--checkpoint-interval", "0.5"]  # fmt: skip
    refused = kstream("run", "kstream.examples.wordcount:job", *common, cwd=tmp_path)
    try:
        line = one_line_error(refused)
    finally:
        if refused.poll() is None:  # it runs, feeding itself: stop it
            stop(refused)
    assert line == (
        f"kstream: error: sink kafka:{topic} writes topic {topic}, which the job reads as its "
        "input: every output would be read again (a loop without end); give another output "
        "topic, or --allow-feedback (Job(..., allow_feedback=True)) if the job is meant to "
        "read its outputs"
    )
    assert sorted((r.value or b"").decode() for r in read_all(bootstrap, topic)) == sorted(lines)
    # Asked for, the loop runs: each line is marked once, and marked lines end it.
    allowed = kstream("run", "marking.py:job", *common, "--allow-feedback", cwd=tmp_path)
    expected = sorted(lines + [f"seen {line}" for line in lines])
    try:
        is_running = started(allowed, name, bootstrap)

        def marked() -> bool:
            is_running()
            values = sorted((r.value or b"").decode() for r in read_all(bootstrap, topic))
            return values == expected

        wait_for(marked, 120, "every line to be marked once")
    finally:
        if allowed.poll() is None:
            stop(allowed)


def started(proc: subprocess.Popen[str], name: str, bootstrap: str) -> Callable[[], bool]:
    """A predicate: the run wrote its first `recover`; fails at once if it exited."""

    def check() -> bool:
        if proc.poll() is not None:
            _, stderr = proc.communicate()
            raise AssertionError(f"kstream run exited with {proc.returncode}: {stderr}")
        return Admin(bootstrap).partitions(f"kstream.{name}.control") is not None and any(
            m["type"] == "recover" for m in read_history(bootstrap, name)
        )

    return check


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    return stderr


def test_a_restart_with_another_worker_count_rescales_up_to_the_max_parallelism(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("rescale")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    common = ["-p", f"input={src}", "-p", f"output={dst}", "--job-name", name,
              "--bootstrap-servers", bootstrap, "--state-dir", str(tmp_path / "state")]  # fmt: skip

    def recovers() -> int:
        return sum(m["type"] == "recover" for m in read_history(bootstrap, name))

    def completed() -> bool:
        return any(m["type"] == "complete" for m in read_history(bootstrap, name))

    first = kstream("run", "myjob.py:job", *common, "--workers", "2", cwd=tmp_path)
    try:
        wait_for(started(first, name, bootstrap), 120, "the first run to start")
        wait_for(completed, 120, "a checkpoint to complete")
    finally:
        stop(first)
    before = recovers()
    again = kstream("run", "myjob.py:job", *common, "--workers", "3", cwd=tmp_path)
    try:
        wait_for(lambda: started(again, name, bootstrap)() and recovers() > before, 120, "rescale")
    finally:
        stderr = stop(again)
    assert "rescaling from parallelism [2, 2] to [3, 3]" in stderr
    assert Admin(bootstrap).partitions(f"kstream.{name}.s1") == 9
    above = kstream("run", "myjob.py:job", *common, "--workers", "129", cwd=tmp_path)
    assert one_line_error(above).startswith(
        f"kstream: error: stage 0 of job {name} would run 129 subtasks (--workers 129), "
        "more than its max parallelism 128"
    )


def test_a_job_module_in_the_current_directory_runs_on_every_worker(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("cwd-job")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    lines = [f"w{i % 5} x" for i in range(200)]
    produce(bootstrap, src, [(None, line.encode()) for line in lines])
    (tmp_path / "probe_wc.py").write_text(JOB_FILE)
    proc = subprocess.Popen(
        [KSTREAM_SCRIPT, "run", "probe_wc:job", "-p", f"input={src}", "-p", f"output={dst}",
         "--job-name", name, "--bootstrap-servers", bootstrap, "--workers", "2",
         "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    truth = Counter(w for line in lines for w in line.split())
    try:
        is_running = started(proc, name, bootstrap)

        def counted() -> bool:
            is_running()
            best: dict[str, int] = {}
            for r in read_all(bootstrap, dst):
                word = (r.key or b"").decode()
                best[word] = max(best.get(word, 0), int(r.value or b"0"))
            return best == dict(truth)

        wait_for(counted, 120, "both workers to count every word")
        assert len(worker_processes(name)) == 2
    finally:
        if proc.poll() is None:
            stop(proc)
