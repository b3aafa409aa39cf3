"""What a job does when its object store fails it: an object of the newest checkpoint
missing or damaged (a loud fallback to the previous checkpoint), and a store that
hangs (SIGSTOP) mid-run (processing goes on, checkpoints abort, then complete again;
nothing lost, nothing twice).

The hang lasts 20 s in the default tier, to keep it short, and a full minute in
the extended tier.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from object_store import Bucket
from test_checkpoint_storage_full import aborts, completed
from test_cli_run import wait_for
from test_job_safety import (
    Job,
    assert_exactly_once,
    caught_up,
    lines,
    resumes_loudly_from_before,
    run_until_checkpointed,
    stop,
    truth,
)

from kstream.infra.admin import Admin
from kstream.protocol.messages import WorkerAlive
from kstream.runtime.control import read_history, read_messages
from kstream.testing import produce, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e, pytest.mark.s3]


def s3_job(bucket: Bucket, tmp_path: Path, bootstrap: str, *options: str) -> Job:
    return Job(
        bootstrap, tmp_path, None, "--checkpoint-storage", bucket.url(),
        "--s3-endpoint-url", bucket.store.endpoint, *options,
    )  # fmt: skip


def keys_of(bucket: Bucket, job: Job, checkpoint: int, where: Callable[[str], bool]) -> list[str]:
    """The keys of `job`'s checkpoint `checkpoint` of its subtasks s1-* that `where` keeps."""
    prefix = f"chk/{job.name}/chk-{checkpoint}/"
    return [k for k in bucket.listing(prefix) if "/s1-" in k and where(k)]


def damage(bucket: Bucket, job: Job, n: int, how: str) -> str:
    """Damage checkpoint `n` of `job` in `bucket` as `how` says; the key damaged."""
    if how == "meta.json edited":
        key = keys_of(bucket, job, n, lambda k: k.endswith("/meta.json"))[0]
        body = bucket.client.get_object(Bucket=bucket.name, Key=key)["Body"].read()
        bucket.client.put_object(Bucket=bucket.name, Key=key, Body=body[:-1])
    elif how == "object deleted":
        # RocksDB's MANIFEST: a file of this checkpoint's own, shared with no other.
        key = keys_of(bucket, job, n, lambda k: "/db/MANIFEST-" in k)[0]
        bucket.client.delete_object(Bucket=bucket.name, Key=key)
    else:  # bytes changed, size kept: only the SHA-256 in the manifest tells
        key = keys_of(bucket, job, n, lambda k: "/db/MANIFEST-" in k)[0]
        body = bucket.client.get_object(Bucket=bucket.name, Key=key)["Body"].read()
        flipped = bytes(b ^ 0xFF for b in body[:16]) + body[16:]
        bucket.client.put_object(Bucket=bucket.name, Key=key, Body=flipped)
    return key


@pytest.mark.parametrize("how", ["meta.json edited", "object deleted", "bytes changed"])
def test_a_damaged_newest_s3_checkpoint_falls_back_loudly_to_the_previous_one(
    bootstrap: str, bucket: Bucket, tmp_path: Path, how: str
) -> None:
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    first, more = lines(2000), lines(1000, salt=5)
    produce(bootstrap, src, [(None, line.encode()) for line in first])
    job = s3_job(bucket, tmp_path, bootstrap)
    newest = run_until_checkpointed(job, src, dst, first)
    damage(bucket, job, newest, how)
    resumes_loudly_from_before(job, src, dst, newest, first, more)


def records_in(bootstrap: str, name: str) -> int:
    """The records the job's current worker processes read so far (their heartbeats)."""
    latest: dict[str, int] = {}
    for m in read_messages(bootstrap, name):
        if isinstance(m, WorkerAlive) and m.counters is not None and m.process is not None:
            latest[m.process] = m.counters.records_in
    return sum(latest.values())


@pytest.mark.parametrize("hang_s", [20.0, pytest.param(60.0, marks=pytest.mark.extended)])
def test_a_hung_store_aborts_checkpoints_while_processing_goes_on(
    bootstrap: str, bucket: Bucket, tmp_path: Path, hang_s: float
) -> None:
    """S3Proxy stopped (SIGSTOP: connections open, nobody answers) for `hang_s`: the
    job keeps reading its input, checkpoints time out and abort, the job is not rolled
    back; once the store answers again checkpoints complete and every count is
    committed exactly once."""
    src, dst = unique_name("in"), unique_name("out")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    job = s3_job(bucket, tmp_path, bootstrap, "--checkpoint-timeout", "5")
    first, more = lines(2000), lines(3000, salt=3)
    produce(bootstrap, src, [(None, line.encode()) for line in first])
    proc = job.run(src, dst)
    store = bucket.store
    try:
        wait_for(lambda: caught_up(bootstrap, dst, truth(first)), 120, "the first counts")
        wait_for(lambda: completed(bootstrap, job.name) >= 2, 60, "two checkpoints")
        generations = sum(1 for m in read_history(bootstrap, job.name) if m["type"] == "recover")
        read_before, aborted = records_in(bootstrap, job.name), len(aborts(bootstrap, job.name))
        store.pause()
        paused = time.monotonic()
        try:
            produce(bootstrap, src, [(None, line.encode()) for line in more])
            wait_for(
                lambda: records_in(bootstrap, job.name) >= read_before + len(more),
                60, "the input sent during the hang to be read",
            )  # fmt: skip
            wait_for(
                lambda: len(aborts(bootstrap, job.name)) >= aborted + 1,
                60, "a checkpoint to abort",
            )  # fmt: skip
            hung_at = completed(bootstrap, job.name)
            # The rest of the hang: the job must ride it out (not exit, not roll back).
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, paused + hang_s - time.monotonic()))
        finally:
            store.resume()
        assert proc.poll() is None, "the job stopped while its store hung"
        wait_for(lambda: caught_up(bootstrap, dst, truth(first + more)), 120, "every count")
        assert completed(bootstrap, job.name) > hung_at
        history = read_history(bootstrap, job.name)
        recovers = [m for m in history if m["type"] == "recover"]
        assert len(recovers) == generations, (
            f"the job was rolled back while its store hung: {recovers[generations:]}; "
            f"aborts: {[m for m in history if m['type'] == 'abort']}"
        )
    finally:
        stderr = stop(proc) if proc.poll() is None else proc.communicate()[1]
    assert "Traceback" not in stderr, stderr
    assert_exactly_once(bootstrap, dst, truth(first + more))
