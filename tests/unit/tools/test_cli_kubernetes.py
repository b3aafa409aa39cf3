"""What the command line offers a supervisor such as Kubernetes: `--workers` and
`--worker` from the environment (a ConfigMap, a StatefulSet's pod index) and
`kstream alive`, the probe of ``kstream run --liveness-file``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from kstream.tools.cli import app

SPEC = "kstream.examples.wordcount:job"


def worker(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`kstream worker` in a process of its own (it installs signal handlers and an
    os._exit guard); every case here ends before it contacts Kafka."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KSTREAM_WORKER")}
    return subprocess.run(
        [sys.executable, "-m", "kstream", "worker", SPEC, *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_worker_takes_its_index_and_the_worker_count_from_the_environment() -> None:
    done = worker(env={"KSTREAM_WORKERS": "2", "KSTREAM_WORKER": "5"})
    assert done.returncode == 2, done.stderr
    assert "--worker must be in 0..1, got 5" in done.stderr


def test_the_command_line_wins_over_the_environment() -> None:
    done = worker(
        "--worker", "7", "--workers", "3", env={"KSTREAM_WORKERS": "9", "KSTREAM_WORKER": "0"}
    )
    assert done.returncode == 2, done.stderr
    assert "--worker must be in 0..2, got 7" in done.stderr


def test_a_bad_index_in_the_environment_is_refused_in_one_line() -> None:
    done = worker(env={"KSTREAM_WORKERS": "2", "KSTREAM_WORKER": "-1"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("--worker must be an integer >= 0, got -1")


def test_run_takes_the_worker_count_from_the_environment() -> None:
    result = CliRunner().invoke(app, ["run", SPEC], env={"KSTREAM_WORKERS": "0"})
    assert result.exit_code != 0
    assert "--workers must be an integer >= 1, got 0" in str(result.exception)


def test_alive_passes_for_a_fresh_file_and_fails_in_one_line_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "alive"
    runner = CliRunner()
    missing = runner.invoke(app, ["alive", str(path)])
    assert missing.exit_code == 1
    assert "does not exist" in missing.output
    path.touch()
    assert runner.invoke(app, ["alive", str(path), "--max-age", "30"]).exit_code == 0
    os.utime(path, (path.stat().st_mtime - 100,) * 2)
    stale = runner.invoke(app, ["alive", str(path), "--max-age", "30"])
    assert stale.exit_code == 1
    assert "last touched 100." in stale.output
    assert "--max-age 30" in stale.output


def test_alive_refuses_a_non_positive_max_age(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["alive", str(tmp_path), "--max-age", "0"])
    assert result.exit_code != 0
    assert "--max-age must be a finite number > 0" in str(result.exception)


def test_run_refuses_a_liveness_file_in_a_missing_directory_before_the_job_loads(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere" / "alive"
    result = CliRunner().invoke(app, ["run", "no_such_module:job", "--liveness-file", str(missing)])
    assert result.exit_code != 0
    assert f"directory {missing.parent} does not exist" in str(result.exception)
