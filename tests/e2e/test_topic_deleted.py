"""A topic deleted while the job runs: the job stops with one line naming it, and a
deleted output topic, once recreated, receives what the job had not yet committed."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from test_cli_run import JOB_FILE, kstream, wait_for

from kstream.infra.admin import Admin
from kstream.runtime.control import read_history
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]


def delete_topic(bootstrap: str, topic: str) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.delete_topics([topic])[topic].result(30)
    wait_for(lambda: topic not in Admin(bootstrap).topics(), 60, f"{topic} to be gone")


def completed(bootstrap: str, name: str) -> int:
    return sum(m["type"] == "complete" for m in read_history(bootstrap, name))


def run(bootstrap: str, tmp_path: Path, src: str, dst: str, name: str) -> subprocess.Popen[str]:
    return kstream(
        "run", "myjob.py:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.5",
        cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize("deleted", ["input", "output"])
def test_a_deleted_topic_stops_the_job_with_one_line(
    bootstrap: str, tmp_path: Path, deleted: str
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name(f"deleted-{deleted}")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    first = [f"a b c{i % 7}" for i in range(1000)]
    produce(bootstrap, src, [(None, line.encode()) for line in first])
    proc = run(bootstrap, tmp_path, src, dst, name)
    try:
        wait_for(lambda: len(read_all(bootstrap, dst)) == 3000, 120, "the first outputs")
        delete_topic(bootstrap, src if deleted == "input" else dst)
        if deleted == "output":
            second = [f"b d{i % 5}" for i in range(1000)]
            produce(bootstrap, src, [(None, line.encode()) for line in second])
        _, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    topic = src if deleted == "input" else dst
    assert f"failed: {deleted} topic {topic} no longer exists (deleted while the job ran?)" in (
        stderr
    ), stderr
    if deleted == "input":
        return
    # Recreated, the output receives every count the job had not committed: per
    # word a run of counts without gap or repeat that ends at the word's total.
    Admin(bootstrap).create_topics({dst: 2})
    proc = run(bootstrap, tmp_path, src, dst, name)
    truth = Counter(w for line in first + second for w in line.split())
    later = {w for line in second for w in line.split()}
    try:

        def caught_up() -> bool:
            best: dict[str, int] = {}
            for r in read_all(bootstrap, dst):
                word = (r.key or b"").decode()
                best[word] = max(best.get(word, 0), int(r.value or b"0"))
            return all(best.get(w) == truth[w] for w in later)

        wait_for(caught_up, 180, "the second input's counts in the recreated topic")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    seen: dict[str, list[int]] = {}
    for r in read_all(bootstrap, dst):
        seen.setdefault((r.key or b"").decode(), []).append(int(r.value or b"0"))
    for word, counts in seen.items():
        assert counts == list(range(counts[0], truth[word] + 1)), (word, counts[:5])
    # Every word of the second input was counted after the deletion.
    assert later <= set(seen)
