"""`kstream postgres` / `LocalPostgres`: a real server, started twice, stopped cleanly."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from kstream.infra.postgres import LocalPostgres, postgres_bin

pytestmark = [pytest.mark.postgres]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kstream_postgres(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kstream", "postgres", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_start_is_idempotent_allows_prepared_transactions_and_stop_leaves_nothing() -> None:
    if postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed (apt-get install -y postgresql)")
    port = free_port()
    server = LocalPostgres(port)
    try:
        first = kstream_postgres("start", "--port", str(port))
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip().splitlines()[-1] == server.url
        pid = server.status().pid
        assert pid is not None
        again = kstream_postgres("start", "--port", str(port))
        assert again.returncode == 0, again.stderr
        assert "already running" in again.stderr
        assert server.status().pid == pid
        with psycopg.connect(server.url) as conn:
            row = conn.execute("SHOW max_prepared_transactions").fetchone()
        assert row is not None
        assert int(row[0]) > 0
        assert kstream_postgres("status", "--port", str(port)).returncode == 0
        stopped = kstream_postgres("stop", "--port", str(port))
        assert stopped.returncode == 0, stopped.stderr
        assert server.status().pid is None
        # pg_ctl stop -w waited for the postmaster to exit (unreaped at most: our
        # process is not its parent).
        assert _gone_or_zombie(pid)
        assert kstream_postgres("status", "--port", str(port)).returncode == 1
    finally:
        server.stop()
        server.wipe()


def _gone_or_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"
