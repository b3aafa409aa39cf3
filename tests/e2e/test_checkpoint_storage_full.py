"""A checkpoint directory that is full or read-only: checkpoints fail, the job keeps
its last good state, and once the storage is back every output is there exactly once.

The checkpoint directory is a real, tiny tmpfs mounted for the test (root only):
filled to the last byte, or remounted read-only, while the word count runs.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_cli_run import JOB_FILE, kstream, wait_for

from kstream.infra.admin import Admin
from kstream.runtime.checkpoint.storage import LocalCheckpointStorage
from kstream.runtime.control import read_history
from kstream.testing import produce, read_all, unique_name

pytestmark = [
    pytest.mark.broker,
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True)
    mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


class DiskFull:
    """Keeps the file system of `directory` full until `release`.

    The job frees space while the disk is full (a failed checkpoint's partial
    files are removed), so filling once is not enough: a thread takes back any
    freed byte, the way other writers on a shared full disk would.
    """

    def __init__(self, directory: Path) -> None:
        self._path = directory / "filler"
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self._stop = threading.Event()
        self._top_up()
        with pytest.raises(OSError, match="No space left") as full:
            (directory / "probe").write_bytes(b"\0" * 4096)
        assert full.value.errno == errno.ENOSPC
        (directory / "probe").unlink(missing_ok=True)
        self._keeper = threading.Thread(target=self._keep, daemon=True)
        self._keeper.start()

    def _top_up(self) -> None:
        for size in (1 << 20, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(self._fd, b"\0" * size):
                    pass

    def _keep(self) -> None:
        # The poll period bounds how long freed space stays free: a few ms, far
        # below the time a checkpoint takes to write its snapshots.
        while not self._stop.wait(0.002):
            self._top_up()

    def release(self) -> None:
        """Stop keeping the disk full and give all its space back (once)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._keeper.join()
        os.close(self._fd)
        self._path.unlink()


def aborts(bootstrap: str, name: str) -> list[str]:
    return [m["reason"] for m in read_history(bootstrap, name) if m["type"] == "abort"]


def completions(bootstrap: str, name: str) -> list[int]:
    return [m["checkpoint"] for m in read_history(bootstrap, name) if m["type"] == "complete"]


def completed(bootstrap: str, name: str) -> int:
    return len(completions(bootstrap, name))


def word_counts(lines: list[str]) -> dict[str, int]:
    """Each word's count over `lines`: what the job's last output per word must say."""
    truth: dict[str, int] = {}
    for line in lines:
        for w in line.split():
            truth[w] = truth.get(w, 0) + 1
    return truth


def latest_counts(bootstrap: str, topic: str) -> dict[str, int]:
    """Each word's highest committed count in `topic`."""
    best: dict[str, int] = {}
    for r in read_all(bootstrap, topic):
        word = (r.key or b"").decode()
        best[word] = max(best.get(word, 0), int(r.value or b"0"))
    return best


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_checkpoints_fail_while_storage_is_unusable_and_nothing_is_lost(
    bootstrap: str, tmp_path: Path, fault: str
) -> None:
    src, dst, name = unique_name("in"), unique_name("out"), unique_name(f"storage-{fault}")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    state = tmp_path / "state"
    with tmpfs(state / name / "checkpoints", "4m") as checkpoints:
        proc = kstream(
            "run", "myjob.py:job", "-p", f"input={src}", "-p", f"output={dst}",
            "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
            "--state-dir", str(state), "--checkpoint-interval", "0.3",
            cwd=tmp_path,
        )  # fmt: skip
        filler: DiskFull | None = None
        try:
            first = [f"a b c{i % 7}" for i in range(2000)]
            produce(bootstrap, src, [(None, line.encode()) for line in first])
            # A good checkpoint that holds some state, then the storage fails.
            wait_for(lambda: completed(bootstrap, name) >= 2, 120, "two completed checkpoints")
            if fault == "full":
                filler = DiskFull(checkpoints)
            else:
                mount("-o", "remount,ro", str(checkpoints))
            before = completed(bootstrap, name)
            # The subtasks of one completed checkpoint: every checkpoint has them all.
            tasks = {
                d.name
                for d in (checkpoints / f"chk-{completions(bootstrap, name)[before - 1]}").iterdir()
            }
            second = [f"b d{i % 5}" for i in range(3000)]
            produce(bootstrap, src, [(None, line.encode()) for line in second])
            reason = "No space left on device" if fault == "full" else "Read-only file system"
            wait_for(
                lambda: sum(reason in r for r in aborts(bootstrap, name)) >= 3,
                120,
                f"three checkpoints aborted with {reason!r}",
            )
            assert proc.poll() is None, "the job stopped while its checkpoint storage failed"
            # A checkpoint in flight at the fault may still complete if its subtasks
            # had all stored their snapshots before it; any other completion would
            # be a restore point with nothing behind it.
            storage = LocalCheckpointStorage(checkpoints)
            late = completions(bootstrap, name)[before:]
            assert all(storage.validate(n, tasks) == [] for n in late), (
                late,
                [storage.validate(n, tasks) for n in late],
            )
            assert len(late) <= 1, late  # the fault stopped checkpointing
            if filler is not None:
                filler.release()
            else:
                mount("-o", "remount,rw", str(checkpoints))
            lines = first + second
            truth = word_counts(lines)

            def caught_up() -> bool:
                return latest_counts(bootstrap, dst) == truth

            wait_for(caught_up, 180, "every word's count once the storage is back")
            assert completed(bootstrap, name) > before
        finally:
            if filler is not None:
                filler.release()
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=120)
            stored = sorted(int(p.name[4:]) for p in checkpoints.glob("chk-*"))
            staged = [int(p.name.split("-")[1]) for p in state.glob("*/worker-*/staging/chk-*")]
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert reason in stderr, stderr  # the console named the cause
    # Nothing of the failed checkpoints stays behind to fill the disk: no partial
    # snapshot below the newest completed one but the retained ones, no staged copy.
    done = [m["checkpoint"] for m in read_history(bootstrap, name) if m["type"] == "complete"]
    assert [n for n in stored if n < max(done)] == sorted(done)[-3:-1], (stored, done)
    assert all(n > max(done) for n in staged), (staged, done)
    # Exactly once: each word's outputs are 1..N, each once, in order.
    seen: dict[str, list[int]] = {}
    for r in read_all(bootstrap, dst):
        seen.setdefault((r.key or b"").decode(), []).append(int(r.value or b"0"))
    assert seen == {w: list(range(1, n + 1)) for w, n in truth.items()}


def uncommitted_counts(bootstrap: str, topic: str) -> dict[str, int]:
    """Each word's highest count written to `topic`, committed or not.

    Exactly-once output becomes visible only when a checkpoint completes; while
    checkpoints fail, what the sink wrote into its open transactions shows that
    the job still reads and processes its input.
    """
    best: dict[str, int] = {}
    for r in read_all(bootstrap, topic, isolation="read_uncommitted"):
        word = (r.key or b"").decode()
        best[word] = max(best.get(word, 0), int(r.value or b"0"))
    return best


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_processing_goes_on_while_checkpoint_storage_fails(
    bootstrap: str, tmp_path: Path, fault: str
) -> None:
    """Input keeps being processed through many failed checkpoints (more than the
    sink has transactions for), each failure is named on one line, and the first
    checkpoint after the storage is back completes."""
    src, dst, name = unique_name("in"), unique_name("out"), unique_name(f"goes-on-{fault}")
    Admin(bootstrap).create_topics({src: 2, dst: 2})
    (tmp_path / "myjob.py").write_text(JOB_FILE)
    state = tmp_path / "state"
    reason = "No space left on device" if fault == "full" else "Read-only file system"
    with tmpfs(state / name / "checkpoints", "4m") as checkpoints:
        proc = kstream(
            "run", "myjob.py:job", "-p", f"input={src}", "-p", f"output={dst}",
            "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
            "--state-dir", str(state), "--checkpoint-interval", "0.3",
            "--checkpoint-timeout", "60",
            cwd=tmp_path,
        )  # fmt: skip
        filler: DiskFull | None = None
        try:
            lines = [f"a b c{i % 7}" for i in range(500)]
            produce(bootstrap, src, [(None, line.encode()) for line in lines])
            wait_for(lambda: completed(bootstrap, name) >= 2, 120, "two completed checkpoints")
            if fault == "full":
                filler = DiskFull(checkpoints)
            else:
                mount("-o", "remount,ro", str(checkpoints))
            before = completed(bootstrap, name)
            # Batch after batch, each processed while the storage fails, with a failed
            # checkpoint between two batches: each lands in an epoch of its own, and
            # they outnumber the sink's transactions (one per epoch until a checkpoint
            # completes).
            for k in range(8):
                batch = [f"k{k} b" for _ in range(40)]
                produce(bootstrap, src, [(None, line.encode()) for line in batch])
                lines += batch
                failed = sum(reason in r for r in aborts(bootstrap, name))
                wait_for(
                    lambda k=k: uncommitted_counts(bootstrap, dst).get(f"k{k}") == 40,
                    60,
                    f"batch {k} processed while the checkpoint storage fails",
                )
                wait_for(
                    lambda failed=failed: (
                        sum(reason in r for r in aborts(bootstrap, name)) > failed
                    ),
                    60,
                    f"a checkpoint after batch {k} to fail",
                )
            assert proc.poll() is None, "the job stopped while its checkpoint storage failed"
            late = completions(bootstrap, name)[before:]
            assert len(late) <= 1, late  # the fault stopped checkpointing
            at_restore = completed(bootstrap, name)
            if filler is not None:
                filler.release()
            else:
                mount("-o", "remount,rw", str(checkpoints))
            wait_for(
                lambda: completed(bootstrap, name) > at_restore,
                60,
                "a checkpoint to complete once the storage is back",
            )
            truth = word_counts(lines)

            def caught_up() -> bool:
                return latest_counts(bootstrap, dst) == truth

            wait_for(caught_up, 60, "every word's count committed once the storage is back")
        finally:
            if filler is not None:
                filler.release()
            proc.send_signal(signal.SIGTERM)
            stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    # No recovery: the job went on from its state, it did not roll back.
    recovered = [m for m in read_history(bootstrap, name) if m["type"] == "recover"]
    assert len(recovered) == 1, [m["reason"] for m in recovered]
    # Each failure is one line naming its cause and a file it could not write; no
    # Python repr of an error list.
    console = stdout + stderr
    line = re.compile(
        rf"checkpoint \d+ aborted: declined by s\d-\d: snapshot not stored: {reason}: "
        rf"{re.escape(str(checkpoints))}/chk-\d+\S*"
    )
    assert any(line.search(text) for text in console.splitlines()), console
    assert "[(" not in console, console
    assert "Errno" not in console, console
    seen: dict[str, list[int]] = {}
    for r in read_all(bootstrap, dst):
        seen.setdefault((r.key or b"").decode(), []).append(int(r.value or b"0"))
    assert seen == {w: list(range(1, n + 1)) for w, n in truth.items()}
