"""`kstream status` and JSON logs on real processes and a real broker.

The word count runs on two workers with ``--log-format json``; `kstream status
--json` is run as a separate process (as from another machine: it reads only
the control topic) and checked for the workers, the latest checkpoint, the
record totals, a recovery after a SIGKILL of a worker, and the stop. The
workers' log files and the runner's stderr are parsed line by line as JSON.
Costs about 12 s.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli_run import kstream, wait_for, worker_processes

from kstream.infra.admin import Admin
from kstream.protocol.names import control_topic
from kstream.testing import produce, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def status(bootstrap: str, name: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "kstream", "status", "--job-name", name, "--json",
         "--bootstrap-servers", bootstrap],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_status_and_json_logs_of_a_running_job(bootstrap: str, tmp_path: Path) -> None:
    admin = Admin(bootstrap)
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("status-job")
    admin.create_topics({src: 2, dst: 2})
    lines = [f"a b c{i % 7}" for i in range(2000)]
    produce(bootstrap, src, [(None, line.encode()) for line in lines])
    proc = kstream(
        "run", "kstream.examples.wordcount:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path), "--checkpoint-interval", "0.5", "--log-format", "json",
    )  # fmt: skip
    try:
        wait_for(lambda: admin.partitions(control_topic(name)) is not None, 60, "the job to start")

        def drained() -> bool:
            s = status(bootstrap, name)
            return (
                s["records_in"] >= len(lines)
                and s["latest_checkpoint"] is not None
                and len(s["workers"]) == 2
            )

        wait_for(drained, 90, "the input read and a checkpoint completed, per kstream status")
        s = status(bootstrap, name)
        assert s["version"] == 1
        assert s["state"] == "running"
        assert s["generation"] == 1
        assert [(w["worker"], w["alive"], w["generation"]) for w in s["workers"]] == [
            ("w0", True, 1),
            ("w1", True, 1),
        ]
        assert s["records_in"] == len(lines)
        assert s["records_out"] == 3 * len(lines)
        latest = s["latest_checkpoint"]
        assert latest["generation"] == 1
        assert 0 <= latest["age_s"] < 30
        assert {t["subtask"] for t in s["subtasks"]} == {"s0-0", "s0-1", "s1-0", "s1-1"}
        assert s["recoveries"] == 0
        assert [r["cause"] for r in s["recent_recoveries"]] == ["start"]

        victim = worker_processes(name)[0]
        os.kill(victim, signal.SIGKILL)

        def recovered() -> bool:
            s = status(bootstrap, name)
            return (
                s["recoveries"] == 1
                and s["generation"] == 2
                and all(w["alive"] and w["generation"] == 2 for w in s["workers"])
                and not any(w["restoring"] for w in s["workers"])
                and s["latest_checkpoint"]["generation"] == 2
            )

        wait_for(recovered, 90, "the recovery and a checkpoint of generation 2, per kstream status")
        last = status(bootstrap, name)["recent_recoveries"][-1]
        assert last["cause"] == "worker_lost", last
        assert last["checkpoint"] is not None, "rolled back to a checkpoint"
        assert last["reason"].startswith("worker w"), last

        # The human screen names the same.
        screen = kstream("status", "--job-name", name, "--bootstrap-servers", bootstrap)
        text, _ = screen.communicate(timeout=60)
        assert screen.returncode == 0
        assert f"job {name}: running" in text
        assert "worker_lost" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert status(bootstrap, name)["state"] == "stopped"

    # Every line the runner wrote is a JSON object; its lines name the job.
    runner = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert runner, "the runner said something"
    assert all(r["job"] == name for r in runner)
    assert any(r["message"].startswith("recovery:") for r in runner), runner
    # The workers' logs: JSON lines with their context.
    records = []
    for log in sorted((tmp_path / name / "logs").glob("worker-*.log")):
        for line in log.read_text().splitlines():
            if line.strip():
                records.append(json.loads(line))
    restored = [r for r in records if "restored" in r["message"]]
    assert {(r["worker"], r["generation"]) for r in restored} >= {("w0", 1), ("w1", 1)}
    for r in restored:
        assert r["job"] == name
        assert r["logger"].startswith("kstream")
        assert r["level"] == "INFO"
        assert r["time"].endswith("Z")
    assert any(r["generation"] == 2 and isinstance(r.get("checkpoint"), int) for r in restored)
