"""`kstream run --metrics-port` on real processes and a real broker, scraped as Prometheus does.

The word count runs on two workers; every endpoint is scraped over HTTP and
parsed with Prometheus' own text parser. What is checked can fail: records
in/out equal the known input, checkpoints are counted as the control topic
completes them, a SIGKILLed worker's rollback is counted with its cause, and
the consumer lag falls to 0 once the input is drained (again after the
recovery). Costs about 15 s.
"""

from __future__ import annotations

import os
import signal
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_cli_run import kstream, wait_for, worker_processes

from kstream.infra.admin import Admin
from kstream.protocol.messages import Completed
from kstream.runtime.control import read_messages
from kstream.testing import free_ports, produce, unique_name

pytestmark = [pytest.mark.broker, pytest.mark.e2e]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    """Every sample the endpoint on `port` serves now; {} if nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return {}
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def total(
    samples: Samples, name: str, keep: Callable[[dict[str, str]], bool] | None = None
) -> float:
    """The sum of `name` over the samples whose labels `keep` accepts (all: None)."""
    return sum(
        v
        for (n, labels), v in samples.items()
        if n == name and (keep is None or keep(dict(labels)))
    )


def stage(n: int) -> Callable[[dict[str, str]], bool]:
    return lambda labels: labels.get("subtask", "").startswith(f"s{n}-")


def test_metrics_of_a_running_job(bootstrap: str, tmp_path: Path) -> None:
    admin = Admin(bootstrap)
    src, dst, name = unique_name("in"), unique_name("out"), unique_name("metrics-job")
    admin.create_topics({src: 2, dst: 2})
    lines = [f"a b c{i % 7}" for i in range(3000)]
    words = sum(len(line.split()) for line in lines)
    # Half to each partition: unkeyed records would go where the producer's sticky
    # partitioner puts them, possibly all to one, and a partition the consumer
    # never got a record from has no position, hence no lag to report.
    for p in (0, 1):
        produce(bootstrap, src, [(None, line.encode()) for line in lines[p::2]], partition=p)
    port = free_ports(3)
    runner_port, worker_ports = port, [port + 1, port + 2]
    proc = kstream(
        "run", "kstream.examples.wordcount:job", "-p", f"input={src}", "-p", f"output={dst}",
        "--bootstrap-servers", bootstrap, "--workers", "2", "--job-name", name,
        "--state-dir", str(tmp_path), "--checkpoint-interval", "0.5",
        "--metrics-port", str(port), "--metrics-address", "127.0.0.1",
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        # The first line the runner says (on stderr); the rest is read at the end.
        first = proc.stderr.readline()
        assert first.startswith("kstream: metrics: coordinator on http://127.0.0.1:"), first
        for p in (runner_port, *worker_ports):
            assert f"127.0.0.1:{p}/metrics" in first, first

        def workers() -> Samples:
            out: Samples = {}
            for p in worker_ports:
                out.update(scrape(p))
            return out

        # Records in/out equal the input once it is drained; no recovery so far.
        def drained() -> bool:
            w = workers()
            return (
                total(w, "kstream_records_in_total", stage(0)) == len(lines)
                and total(w, "kstream_records_out_total", stage(1)) == words
            )

        wait_for(drained, 90, f"{len(lines)} records in and {words} out on the endpoints")
        w = workers()
        assert total(w, "kstream_records_in_total", stage(1)) == words  # channel records
        assert total(w, "kstream_records_out_total", stage(0)) == 0  # stage 0 has no sink
        assert total(w, "kstream_dead_letters_total") == 0
        # RocksDB's figures: the counting stage holds every distinct word (its
        # estimate counts overwrites too), the stateless stage holds no store.
        assert total(w, "kstream_rocksdb_keys", stage(1)) >= len(
            {word for s in lines for word in s.split()}
        )
        assert total(w, "kstream_rocksdb_memory_bytes", stage(1)) > 0
        assert total(w, "kstream_rocksdb_keys", stage(0)) == 0
        lag_of = {
            labels["partition"]
            for (n, fs), _ in w.items()
            if n == "kstream_consumer_lag" and (labels := dict(fs))["topic"] == src
        }
        assert lag_of == {"0", "1"}, "lag of every input partition"
        wait_for(lambda: total(workers(), "kstream_consumer_lag") == 0, 60, "the lag to fall to 0")
        for p in worker_ports:
            one = scrape(p)
            assert total(one, "kstream_worker_generation") == 1
            assert total(one, "process_resident_memory_bytes") > 10_000_000
            assert total(one, "kstream_checkpoint_sync_seconds_count") > 0

        # Checkpoints counted as they complete: monotonic, and in step with the
        # control topic's completions within a scrape's lag.
        seen = []
        for _ in range(3):
            before = total(scrape(runner_port), "kstream_checkpoints_completed_total")
            on_topic = sum(isinstance(m, Completed) for m in read_messages(bootstrap, name))
            after = total(scrape(runner_port), "kstream_checkpoints_completed_total")
            assert before <= on_topic <= after, (before, on_topic, after)
            seen += [before, after]
        assert seen == sorted(seen), "monotonic"
        assert seen[0] > 0
        wait_for(
            lambda: total(scrape(runner_port), "kstream_checkpoints_completed_total") > seen[-1],
            30,
            "the next completion to be counted",
        )
        runner = scrape(runner_port)
        assert total(runner, "kstream_checkpoint_duration_seconds_count") >= seen[-1]
        assert total(runner, "kstream_recoveries_total") == 0

        # A SIGKILLed worker: the rollback is counted with its cause, the
        # replacement serves on the same port as a new process.
        victim = worker_processes(name)[0]
        os.kill(victim, signal.SIGKILL)

        def recovered() -> bool:
            r = scrape(runner_port)
            return (
                total(r, "kstream_recoveries_total", lambda lb: lb["cause"] == "worker_lost") == 1
                and total(r, "kstream_worker_restarts_total") == 1
            )

        wait_for(recovered, 90, "the recovery to be counted")
        assert total(scrape(runner_port), "kstream_recoveries_total") == 1
        wait_for(
            lambda: all(total(scrape(p), "kstream_worker_generation") >= 2 for p in worker_ports),
            90,
            "both workers to serve the new generation",
        )
        # More input after the recovery: counted on top of what the processes
        # counted so far (no process restarts now), and the lag falls to 0 again.
        w = workers()
        read, written = (
            total(w, "kstream_records_in_total", stage(0)),
            total(w, "kstream_records_out_total", stage(1)),
        )
        produce(bootstrap, src, [(None, b"late words") for _ in range(500)])

        def late_drained() -> bool:
            w = workers()
            return (
                total(w, "kstream_records_in_total", stage(0)) >= read + 500
                and total(w, "kstream_records_out_total", stage(1)) >= written + 1000
                and total(w, "kstream_consumer_lag") == 0
            )

        wait_for(late_drained, 90, "the late input to be read, written and drained")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr


@pytest.mark.parametrize("command", ["run", "worker"])
def test_a_bad_metrics_port_is_one_line(bootstrap: str, tmp_path: Path, command: str) -> None:
    """Out of range, or in use (for `run`: the port of a worker it would spawn)."""
    common = [
        "kstream.examples.wordcount:job", "--bootstrap-servers", bootstrap,
        "--job-name", unique_name("metrics-bad"), "--state-dir", str(tmp_path), "--workers", "2",
    ]  # fmt: skip
    if command == "worker":
        common += ["--worker", "1"]
    taken = socket.socket()
    taken.bind(("0.0.0.0", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    try:
        cases = {
            "70000": "error: --metrics-port must be an integer >= 0 and <= 65535, got 70000",
            # `run` serves on P and gives worker 0 P + 1, which is taken.
            str(busy - 1 if command == "run" else busy): f"port {busy} on 0.0.0.0 is in use",
        }
        for port, expected in cases.items():
            proc = kstream(command, *common, "--metrics-port", port)
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 2, (out, err)
            assert err.count("\n") == 1, err
            assert expected in err, err
    finally:
        taken.close()
