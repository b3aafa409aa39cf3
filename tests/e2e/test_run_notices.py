"""What the console of `kstream run` tells: notices while it runs, a summary when it stops."""

from __future__ import annotations

import os
import re
import signal
from collections import Counter
from pathlib import Path

import pytest
from test_cli_run import JOB_FILE, kstream, wait_for, worker_processes

from kstream.infra.admin import Admin
from kstream.protocol.snapshot_id import COORDINATOR, SnapshotId
from kstream.runtime.control import read_history
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

#: The id of the coordinator's second checkpoint (a Lamport id: sequence 2).
SECOND = SnapshotId(2, COORDINATOR).encode()


def settled_after_recovery(bootstrap: str, name: str) -> bool:
    """A checkpoint of a generation after the first completed: every worker left generation 1."""
    history = read_history(bootstrap, name)
    newest = max((m["generation"] for m in history if m["type"] == "recover"), default=0)
    return newest >= 2 and any(
        m["type"] == "complete" and m["generation"] == newest for m in history
    )


def test_run_tells_dead_letters_rollbacks_recoveries_and_sums_up(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("console")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    # Every worker SIGKILLs itself while snapshotting the coordinator's second
    # checkpoint: a recovery that rolls it back, before any input exists (so nothing
    # is replayed).
    proc = kstream(
        "run", "myjob.py:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        cwd=tmp_path, env={**os.environ, "KSTREAM_FAULT": f"snapshotting@{SECOND}"},
    )  # fmt: skip
    lines = [f"a b c{i % 7}" for i in range(1000)] + ["poison pill"] * 3 + ["a z"] * 100
    try:
        wait_for(lambda: settled_after_recovery(bootstrap, name), 120, "the recovery to settle")
        produce(bootstrap, src, [(None, line.encode()) for line in lines])
        truth = Counter(w for line in lines if "poison" not in line for w in line.split())

        def caught_up() -> bool:
            best: dict[str, int] = {}
            for r in read_all(bootstrap, dst):
                word = (r.key or b"").decode()
                best[word] = max(best.get(word, 0), int(r.value or b"0"))
            return best == dict(truth)

        wait_for(caught_up, 120, "every word's count to reach its number of occurrences")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr

    said = [line.removeprefix("kstream: ") for line in stderr.splitlines()]
    dead = [s for s in said if s.startswith("dead letter: ")]
    assert dead, stderr
    assert "ValueError: poisoned line" in dead[0]
    assert dead[0].endswith(f"-> kstream.{name}.dead-letters") or "more)" in dead[0]
    assert any(
        re.fullmatch(r"recovery: worker w[01] lost: killed by signal 9; rolling back to .*", s)
        for s in said
    ), stderr
    assert any(
        re.fullmatch(
            rf"checkpoint {SECOND} aborted: rolled back in generation 2 \(worker w[01] .*\)", s
        )
        for s in said
    ), stderr

    # The summary: exact figures, since all input came after the recovery.
    summary = said[said.index(next(s for s in said if s.startswith(f"job {name} stopped"))) :]
    records = len(lines)
    words = sum(truth.values())
    assert summary[1] == (
        f"  records: {records:,} read from sources, {words:,} written to sinks, "
        f"3 dead letters (kstream.{name}.dead-letters)"
    ), stderr
    completed = sum(m["type"] == "complete" for m in read_history(bootstrap, name))
    assert re.fullmatch(
        rf"  checkpoints: {completed:,} completed \(latest \d+\), \d+ aborted", summary[2]
    )
    assert re.fullmatch(r"  recoveries: [12] - worker w[01] lost: killed by signal 9.*", summary[3])
    assert len(read_all(bootstrap, f"kstream.{name}.dead-letters")) == 3


def test_checkpoints_lists_rolled_back_checkpoints_as_aborted(
    bootstrap: str, tmp_path: Path
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("listing")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    proc = kstream(
        "run", "myjob.py:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        cwd=tmp_path, env={**os.environ, "KSTREAM_FAULT": f"snapshotting@{SECOND}"},
    )  # fmt: skip
    try:
        wait_for(lambda: settled_after_recovery(bootstrap, name), 120, "the recovery to settle")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    listing = kstream(
        "checkpoints", "--job-name", name, "--bootstrap-servers", bootstrap,
        env={**os.environ, "COLUMNS": "400"},  # wide enough that no cell wraps
    )  # fmt: skip
    out, err = listing.communicate(timeout=60)
    assert listing.returncode == 0, err
    # Rich draws the header's borders heavy (┃) and the rows' light (│).
    rows = [[c.strip() for c in row.replace("┃", "│").split("│")[1:-1]] for row in out.splitlines()]
    header = next(cells for cells in rows if cells[:1] == ["id"])
    at = header.index("status")
    status = {
        int(cells[0]): cells[at]
        for cells in rows
        if len(cells) == len(header) and cells[0].isdigit()
    }
    assert re.fullmatch(
        r"aborted: rolled back in generation 2 \(worker w[01] lost: killed by signal 9\)",
        status[SECOND],
    ), out
    # The run stopped cleanly: nothing is left in progress.
    assert "in progress" not in status.values(), out
    assert all(s == "completed" or s.startswith("aborted: ") for s in status.values()), out


def test_run_tells_when_a_worker_stops_answering(bootstrap: str, tmp_path: Path) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("silent")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    proc = kstream(
        "run", "myjob.py:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        cwd=tmp_path,
    )  # fmt: skip

    def silent_recoveries() -> list[dict[str, object]]:
        return [
            m
            for m in read_history(bootstrap, name)
            if m["type"] == "recover" and "silent" in str(m.get("reason"))
        ]

    try:
        wait_for(lambda: len(worker_processes(name)) == 2, 60, "two worker processes")
        wait_for(
            lambda: any(m["type"] == "complete" for m in read_history(bootstrap, name)),
            120,
            "a first checkpoint",
        )
        frozen = worker_processes(name)[0]
        os.kill(frozen, signal.SIGSTOP)  # alive, but it answers nothing
        try:
            wait_for(lambda: silent_recoveries(), 120, "the coordinator to notice the silence")
        finally:
            os.kill(frozen, signal.SIGCONT)
        seen = len(read_history(bootstrap, name))
        wait_for(
            lambda: any(m["type"] == "complete" for m in read_history(bootstrap, name)[seen:]),
            120,
            "a checkpoint after the frozen worker came back",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    said = [line.removeprefix("kstream: ") for line in stderr.splitlines()]
    assert any(
        re.fullmatch(
            r"recovery: worker w[01] silent for more than 15s; rolling back to checkpoint \d+.*", s
        )
        for s in said
    ), stderr
    assert re.fullmatch(r"  recoveries: \d+ - worker w[01] silent for more than 15s.*", said[-2])
