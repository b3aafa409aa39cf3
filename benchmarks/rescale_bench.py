"""A rescale from a savepoint, end to end, phase by phase.

    python -m benchmarks.rescale_bench [--keys 1000000] [--old 2] [--new 5] [--s3]
    (also: python -m benchmarks.key_groups_bench --savepoint [--keys ...] [--new 5] [--s3])

1. The word count (`kstream.examples.wordcount`) runs with `--old` workers over
   `--keys` distinct words, one line of 500 words per record, until its output
   holds a count for every word (its state then holds `--keys` keys).
2. `kstream savepoint --job-name N --stop`: timed from the request until the
   savepoint's URL is printed and the job has stopped.
3. One line with a word the job has seen is written, then `kstream run
   --from-savepoint URL --workers NEW` under a new name, timed from its
   start: the runner's first line (run started), each worker's restore (the
   moment its log says "restored ..." and the time it gives), and the first
   committed output (a read_committed consumer sees the word's count 2).

Checkpoints (and so the savepoint) go to a local directory, or with `--s3` to
S3Proxy started here (`--checkpoint-storage s3://...`). Each phase is printed
with the seconds since the new run started; `uptime` before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from kstream.infra.admin import Admin
from kstream.infra.client_settings import client_config
from kstream.infra.object_store import ObjectStore
from kstream.runtime.checkpoint.objects import s3_client
from kstream.testing import produce

#: Words per input line: 1 M keys are 2 000 records.
LINE_WORDS = 500
PARTITIONS = 10
#: A worker's log line once its subtasks are restored (`WorkerProcess._restore`).
RESTORED = re.compile(r": generation \d+, restored (.*) from checkpoint \d+ in ([\d.]+)s")


def _kstream(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kstream", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def s3proxy(tmp: Path, prefix: str = "rescale") -> Iterator[str]:
    """S3Proxy on a free port with a bucket `bench`; the URL of `prefix` in it. Its
    credentials and endpoint are in this process's environment (and so its children's)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    proxy = ObjectStore(tmp / "s3", port)
    proxy.start()
    os.environ.update(proxy.env)
    try:
        s3_client().create_bucket(Bucket="bench")
        yield f"s3://bench/{prefix}"
    finally:
        proxy.stop()


def _output_size(admin: Admin, topic: str) -> int:
    return sum(high for _, high in admin.watermarks(topic).values())


def rescale(bootstrap: str, keys: int, old: int, new: int, storage: str | None, tmp: Path) -> None:
    """Run the phases above once and print them."""
    run = uuid.uuid4().hex[:8]
    src, dst = f"rsb-{run}-in", f"rsb-{run}-out"
    admin = Admin(bootstrap)
    admin.create_topics({src: PARTITIONS, dst: PARTITIONS})
    words = [f"k{i}" for i in range(keys)]
    rows = [
        (None, " ".join(words[i : i + LINE_WORDS]).encode()) for i in range(0, keys, LINE_WORDS)
    ]
    produce(bootstrap, src, rows)
    state = tmp / "state"
    common = [
        "kstream.examples.wordcount:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--state-dir", str(state),
        "--checkpoint-interval", "1",
        *(["--checkpoint-storage", storage] if storage else []),
    ]  # fmt: skip
    first, second = f"rsb-{run}-a", f"rsb-{run}-b"
    t = time.perf_counter()
    job = _kstream("run", *common, "--job-name", first, "--workers", str(old))
    while _output_size(admin, dst) < keys:
        if job.poll() is not None:
            raise SystemExit(f"the first run exited: {job.communicate()[1]}")
        time.sleep(0.5)  # polling the broker's offsets: no event to wait on
    print(f"loaded {keys:,} keys at {old} workers in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "kstream", "savepoint", "--job-name", first, "--stop",
         "--bootstrap-servers", bootstrap, "--timeout-s", "300"],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"savepoint failed: {done.stderr}")
    url = done.stdout.strip()
    job.communicate(timeout=120)
    print(f"savepoint taken and job stopped in {time.perf_counter() - t:.2f} s: {url}")
    # A word the job counted once: its next output (2) can only come from restored state.
    produce(bootstrap, src, [(None, b"k0")])
    consumer = Consumer(
        client_config(
            bootstrap,
            {"group.id": f"rsb-{run}", "isolation.level": "read_committed"},
            {"enable.auto.commit": False},
        )
    )
    consumer.assign(
        [TopicPartition(dst, p, high) for p, (_, high) in admin.watermarks(dst).items()]
    )
    seen: dict[str, float] = {}
    start = time.perf_counter()
    job = _kstream(
        "run", *common, "--job-name", second, "--workers", str(new), "--from-savepoint", url
    )

    lines: list[str] = []

    def stderr() -> None:
        assert job.stderr is not None
        for line in job.stderr:
            lines.append(line)
            now = time.perf_counter() - start
            seen.setdefault("run started (first line)", now)
            if "importing savepoint" in line:
                seen.setdefault("savepoint opened, import starts (runner)", now)
            if "rescaling from" in line:
                seen.setdefault("import done, rescale decided (runner)", now)

    reader = threading.Thread(target=stderr, daemon=True)
    reader.start()
    logs = state / second / "logs"
    restored: dict[int, tuple[float, str, float]] = {}
    first_output: float | None = None
    try:
        while first_output is None or len(restored) < new:
            if job.poll() is not None:
                raise SystemExit(f"the second run exited {job.returncode}")
            for i in range(new):
                path = logs / f"worker-{i}.log"
                if i in restored or not path.exists():
                    continue
                m = RESTORED.search(path.read_text(errors="replace"))
                if m:
                    restored[i] = (time.perf_counter() - start, m[1], float(m[2]))
            msg = consumer.poll(0.05)
            if first_output is None and msg is not None and msg.error() is None:
                first_output = time.perf_counter() - start
                if (msg.key(), msg.value()) != (b"k0", b"2"):
                    raise SystemExit(f"unexpected output {msg.key()!r}: {msg.value()!r}")
            if time.perf_counter() - start > 300:
                raise SystemExit(f"not done within 300 s: output {first_output}, {restored}")
    finally:
        job.terminate()
        job.communicate(timeout=120)
        consumer.close()
        if first_output is None:
            print("".join(lines), file=sys.stderr)
            for log in sorted(state.glob("**/*.log")):
                print(log.name, log.read_text()[-3000:], file=sys.stderr)
    for what, when in sorted(seen.items(), key=lambda kv: kv[1]):
        print(f"  {when:6.2f} s  {what}")
    for worker, (when, tasks, took) in sorted(restored.items()):
        print(f"  {when:6.2f} s  worker {worker} restored {tasks} (its restore took {took:.2f} s)")
    print(f"  {first_output:6.2f} s  first committed output of the new run")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--old", type=int, default=2)
    parser.add_argument("--new", type=int, default=5)
    parser.add_argument("--s3", action="store_true", help="checkpoints in S3Proxy (started here)")
    args = parser.parse_args(argv)
    bootstrap = os.environ.get("KSTREAM_BOOTSTRAP", "127.0.0.1:9092")
    print(f"before: {_uptime()}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        with contextlib.ExitStack() as stack:
            storage = stack.enter_context(s3proxy(tmp)) if args.s3 else None
            print(f"checkpoint storage: {storage or 'a local directory'}")
            rescale(bootstrap, args.keys, args.old, args.new, storage, tmp)
    print(f"after: {_uptime()}")


if __name__ == "__main__":
    main()
