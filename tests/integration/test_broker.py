"""The local broker's lifecycle, driven through the real `kstream broker` command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kstream.infra.broker import LocalBroker
from kstream.testing import read_all, unique_name

pytestmark = pytest.mark.broker

PORT = int(os.environ.get("KSTREAM_TEST_LIFECYCLE_PORT", "23292"))


def kstream(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kstream", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def java_processes(broker: LocalBroker) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if b"kafka.Kafka" in cmdline and str(broker.directory).encode() in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


@pytest.fixture
def broker() -> Iterator[LocalBroker]:
    b = LocalBroker(PORT)
    b.stop()
    yield b
    b.stop()


def test_start_is_idempotent_prints_bootstrap_and_stop_leaves_no_java(broker: LocalBroker) -> None:
    first = kstream("broker", "start", "--port", str(PORT))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip().splitlines()[-1] == f"127.0.0.1:{PORT}"
    pids = java_processes(broker)
    assert len(pids) == 1

    second = kstream("broker", "start", "--port", str(PORT))
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip().splitlines()[-1] == f"127.0.0.1:{PORT}"
    assert java_processes(broker) == pids, "a second start must not launch another JVM"

    # A plain confluent-kafka script can run a transaction against it.
    topic = unique_name("lifecycle")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"hello")  # auto-create is off: this topic must exist first
    from kstream.infra.admin import Admin

    Admin(broker.bootstrap).create_topics({topic: 1})
    p.commit_transaction(30)
    assert [r.value for r in read_all(broker.bootstrap, topic)] == [b"hello"]

    status = kstream("broker", "status", "--port", str(PORT))
    assert status.returncode == 0
    assert f"pid={pids[0]}" in status.stdout

    stop = kstream("broker", "stop", "--port", str(PORT))
    assert stop.returncode == 0, stop.stderr
    assert java_processes(broker) == []
    assert kstream("broker", "status", "--port", str(PORT)).returncode == 1


def test_stale_pid_file_is_ignored(broker: LocalBroker) -> None:
    broker.directory.mkdir(parents=True, exist_ok=True)
    # Our own pid: alive, but not a broker.
    (broker.directory / "broker.pid").write_text(f"{os.getpid()}\n")
    assert broker.status().running is False
    started = kstream("broker", "start", "--port", str(PORT))
    assert started.returncode == 0, started.stderr
    assert broker.status().pid not in (None, os.getpid())


def test_busy_port_is_one_line_error(broker: LocalBroker) -> None:
    with socket.socket() as holder:
        # SO_REUSEADDR: the previous test's connections may linger in TIME_WAIT.
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", PORT))
        holder.listen()
        done = kstream("broker", "start", "--port", str(PORT))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert f"port {PORT}" in done.stderr
    assert "in use" in done.stderr
    assert java_processes(broker) == []


@pytest.mark.parametrize("tool", ["java", "mvn"])
def test_missing_tool_is_one_line_error(broker: LocalBroker, tool: str, tmp_path: Path) -> None:
    # A PATH holding only python and the other tool.
    import shutil

    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in {"java", "mvn"} - {tool}:
        found = shutil.which(name)
        assert found is not None
        (bindir / name).symlink_to(found)
    env = {**os.environ, "PATH": str(bindir), "KSTREAM_CACHE_DIR": str(tmp_path / "cache")}
    done = kstream("broker", "start", "--port", str(PORT), env=env)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert f"`{tool}` is not on PATH" in done.stderr


def test_unreachable_registry_is_one_line_error(broker: LocalBroker, tmp_path: Path) -> None:
    settings = tmp_path / "settings.xml"
    # A mirror on a closed local port stands in for an unreachable Maven Central,
    # and an empty local repository forces a download.
    settings.write_text(
        "<settings><localRepository>"
        f"{tmp_path / 'm2'}</localRepository><mirrors><mirror><id>nowhere</id>"
        "<mirrorOf>*</mirrorOf><url>http://127.0.0.1:9/</url></mirror></mirrors></settings>"
    )
    env = {
        **os.environ,
        "KSTREAM_CACHE_DIR": str(tmp_path / "cache"),
        "KSTREAM_MVN_ARGS": f"-s {settings}",
    }
    done = kstream("broker", "start", "--port", str(PORT), env=env)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("kstream: error: mvn could not resolve")
    assert "Traceback" not in done.stderr
