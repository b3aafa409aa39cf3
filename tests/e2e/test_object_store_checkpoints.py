"""Jobs whose checkpoints are in an object store (S3Proxy): recovery from a killed
worker, a store unreachable at start-up, and a store that fails while the job runs."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from object_store import Bucket, free_port
from test_checkpoint_storage_full import aborts, completed, latest_counts, word_counts
from test_cli_run import JOB_FILE, kstream, wait_for
from wordcount_runs import assert_exactly_once, run_wordcount

from kstream.infra.admin import Admin
from kstream.infra.object_store import ObjectStore
from kstream.runtime.checkpoint.objects import s3_client
from kstream.testing import produce, read_all, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.s3]


def test_the_word_count_recovers_from_s3_checkpoints_exactly_once(
    bootstrap: str, bucket: Bucket
) -> None:
    messages: list[str] = []
    outcome = run_wordcount(
        bootstrap,
        messages,
        lines=18_000,
        kills=1,
        kill_after=2,
        checkpoint_interval=0.5,
        seed=23,
        rate=3000.0,
        hold_input_while_recovering=True,
        checkpoint_storage=bucket.url(),
    )
    assert outcome.kills == 1, messages
    assert outcome.recoveries >= 1, messages
    assert_exactly_once(outcome)
    keys = bucket.listing()
    assert any("/shared/" in k and k.endswith(".sst") for k in keys), keys
    assert any(k.endswith("/manifest.json") for k in keys), keys

    def stored() -> set[str]:
        return {k.split("/")[2] for k in bucket.listing() if "/chk-" in k}

    # Retention and the sweep ran (on their own thread): the retained checkpoints
    # are left, and perhaps one in flight at the stop, not every one taken.
    assert outcome.checkpoints >= 5, messages  # so the sweep had some to delete
    wait_for(lambda: 1 <= len(stored()) <= 4, 30, "the sweep to leave the retained checkpoints")


@pytest.mark.parametrize(
    ("command", "where"),
    [("run", "closed port"), ("run", "missing bucket"), ("worker", "closed port")],
)
def test_an_unreachable_store_stops_the_start_with_one_line(
    bootstrap: str, bucket: Bucket, tmp_path: Path, command: str, where: str
) -> None:
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    if where == "closed port":
        url, endpoint = bucket.url(), f"http://127.0.0.1:{free_port()}"
    else:
        url, endpoint = "s3://no-such-bucket-kstream/p", bucket.store.endpoint
    src = unique_name("in")
    Admin(bootstrap).create_topics({src: 1})
    args = ["-p", f"input={src}", "-p", f"output={src}-out", "--bootstrap-servers", bootstrap]
    args += ["--state-dir", str(tmp_path / "state"), "--checkpoint-storage", url]
    args += ["--s3-endpoint-url", endpoint]
    if command == "worker":
        args += ["--workers", "1", "--worker", "0"]
    proc = kstream(command, "myjob.py:job", *args, cwd=tmp_path)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stderr
    assert "Traceback" not in stderr, stderr
    errors = [ln for ln in stderr.splitlines() if "unreachable" in ln]
    assert len(errors) == 1, stderr
    assert url in errors[0], errors


def test_checkpoints_abort_while_the_store_is_down_and_resume_after(
    bootstrap: str, bucket: Bucket, tmp_path: Path
) -> None:
    """S3Proxy killed mid-run: snapshots fail to upload, checkpoints abort, input is
    still processed; restarted on the same port and directory, checkpoints complete
    again and every output is there exactly once."""
    store = ObjectStore(tmp_path / "s3" / "data", free_port())
    store.start()
    s3_client(store.endpoint).create_bucket(Bucket="faulty")
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("s3-down")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    proc = kstream(
        "run", "myjob.py:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.3",
        "--checkpoint-timeout", "10", "--checkpoint-storage", "s3://faulty/k",
        "--s3-endpoint-url", store.endpoint,
        cwd=tmp_path, env={**os.environ, **store.env},
    )  # fmt: skip
    try:
        first = [f"a b c{i % 7}" for i in range(2000)]
        produce(bootstrap, src, [(None, line.encode()) for line in first])
        wait_for(lambda: completed(bootstrap, name) >= 2, 60, "two completed checkpoints")
        store.stop()
        before, aborted = completed(bootstrap, name), len(aborts(bootstrap, name))
        second = [f"b d{i % 5}" for i in range(3000)]
        produce(bootstrap, src, [(None, line.encode()) for line in second])
        wait_for(lambda: len(aborts(bootstrap, name)) >= aborted + 2, 60, "two aborted checkpoints")
        assert proc.poll() is None, "the job stopped while its checkpoint storage failed"
        during = completed(bootstrap, name)
        assert during <= before + 1  # only one in flight may have stored every snapshot
        store.start()
        truth = word_counts(first + second)
        # The second input's output commits only with a checkpoint the restarted store took.
        wait_for(lambda: latest_counts(bootstrap, dst) == truth, 60, "every count, committed")
        assert completed(bootstrap, name) > during
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
        store.stop()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    seen: dict[str, list[int]] = {}
    for r in read_all(bootstrap, dst):
        seen.setdefault((r.key or b"").decode(), []).append(int(r.value or b"0"))
    assert seen == {w: list(range(1, n + 1)) for w, n in truth.items()}
