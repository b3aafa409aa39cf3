"""A real PostgreSQL server on 127.0.0.1 for tests, demos and benchmarks, from Debian's packages.

`LocalPostgres(port).start()` runs ``initdb`` once into its directory, with
``max_prepared_transactions`` above 0 (the PostgreSQL sink prepares one
transaction per epoch and subtask), then ``pg_ctl start``; `stop` runs
``pg_ctl stop -m fast`` and waits until the server is gone.

Layout::

    <cache>/postgres-<port>/data/        the cluster (PGDATA)
    <cache>/postgres-<port>/server.log   everything the server prints

PostgreSQL refuses to run as root. Started by root, the server runs as the
``postgres`` user of Debian's package (through ``runuser``), and since root's
cache directory is not readable by others, its directory is
``<postgres's home>/kstream/postgres-<port>`` instead.

The server listens on TCP only (no Unix socket), on 127.0.0.1, and trusts every
local connection: it is a test server, never one to keep data in. Its URL is
``postgresql://postgres@127.0.0.1:<port>/postgres``.

Contract: `start` is idempotent (a running server is left alone) and returns once
the server accepts connections; `stop` leaves no server process behind.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kstream.errors import BrokerError, ConfigurationError, PortInUseError, ToolMissingError
from kstream.infra.broker import port_is_open
from kstream.infra.paths import cache_dir
from kstream.infra.processes import runs_with

__all__ = ["DEFAULT_PORT", "LocalPostgres", "PostgresInfo", "postgres_bin"]

#: Default port: far from PostgreSQL's 5432 so a server of the machine never collides.
DEFAULT_PORT = 25432
#: Prepared transactions the server allows at once: the sink holds at most a few per
#: sink subtask (one per epoch whose checkpoint has not completed).
MAX_PREPARED = 64
#: Seconds ``pg_ctl`` waits for the server to start or stop.
WAIT_S = 60
#: The OS user the server runs as when kstream runs as root (Debian's package makes it).
SERVER_USER = "postgres"

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    """Default progress sink: say nothing."""


def postgres_bin() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``: Debian's newest
    ``/usr/lib/postgresql/<v>/bin``, else the one of ``initdb`` on PATH (None: absent)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdecimal() else 0,
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


@dataclass(frozen=True, slots=True)
class PostgresInfo:
    """What `status` reports about one local server."""

    port: int
    pid: int | None
    directory: Path

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


class LocalPostgres:
    """One local PostgreSQL server, identified by its port."""

    def __init__(self, port: int = DEFAULT_PORT) -> None:
        if not 1024 <= port <= 65535:
            raise ConfigurationError(f"postgres port must be in 1024..65535, got {port}")
        self.port = port
        self._as_root = os.geteuid() == 0
        if self._as_root:
            try:
                home = Path(pwd.getpwnam(SERVER_USER).pw_dir)
            except KeyError:
                home = Path("/nonexistent")
            self.directory = home / "kstream" / f"postgres-{port}"
        else:
            self.directory = cache_dir() / f"postgres-{port}"

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    # -- inspection ---------------------------------------------------------

    def pid(self) -> int | None:
        """The postmaster's pid if it is alive and serves this directory."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError, PermissionError):
            return None
        return pid if runs_with(pid, b"postgres", within=True) else None

    def status(self) -> PostgresInfo:
        return PostgresInfo(self.port, self.pid(), self.directory)

    # -- lifecycle ----------------------------------------------------------

    def start(self, log: Log = _quiet) -> PostgresInfo:
        """Start the server unless it runs; return once it accepts connections.

        Raises `ToolMissingError` (no PostgreSQL binaries), `PortInUseError` or
        `BrokerError` (with the tail of the server's log) instead of hanging.
        """
        if (pid := self.pid()) is not None:
            log(f"postgres already running (pid {pid})")
            return self.status()
        bindir = self._bindir()
        if port_is_open(self.port):
            raise PortInUseError(
                f"port {self.port} on 127.0.0.1 is in use by another process; choose another "
                "with --port"
            )
        if not (self.data / "PG_VERSION").is_file():
            self._initdb(bindir, log)
        log(f"starting PostgreSQL on 127.0.0.1:{self.port} (log: {self.log_file})")
        self._run(
            [str(bindir / "pg_ctl"), "start", "-w", "-t", str(WAIT_S), "-D", str(self.data),
             "-l", str(self.log_file), "-o", f"-p {self.port}"],
            "pg_ctl start",
        )  # fmt: skip
        return self.status()

    def stop(self, log: Log = _quiet) -> bool:
        """Stop the server (fast shutdown: open sessions are rolled back, prepared
        transactions stay). Returns False when none was running."""
        pid = self.pid()
        if pid is None:
            return False
        log(f"stopping postgres (pid {pid})")
        self._run(
            [str(self._bindir() / "pg_ctl"), "stop", "-w", "-t", str(WAIT_S), "-m", "fast",
             "-D", str(self.data)],
            "pg_ctl stop",
        )  # fmt: skip
        return True

    def wipe(self) -> None:
        """Delete this server's data (it must be stopped)."""
        if self.pid() is not None:
            raise BrokerError(f"postgres on port {self.port} is running; stop it before wiping")
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- helpers ------------------------------------------------------------

    def _bindir(self) -> Path:
        bindir = postgres_bin()
        if bindir is None:
            raise ToolMissingError(
                "PostgreSQL's binaries (initdb, pg_ctl) are not installed; on Debian: "
                "apt-get install -y postgresql"
            )
        return bindir

    def _initdb(self, bindir: Path, log: Log) -> None:
        log(f"creating a PostgreSQL cluster in {self.data}")
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._as_root:
            user = pwd.getpwnam(SERVER_USER)
            for d in (self.directory.parent, self.directory):
                os.chown(d, user.pw_uid, user.pw_gid)
        self._run(
            [str(bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
             "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"],
            "initdb",
        )  # fmt: skip
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# kstream: a local test server\n"
                "listen_addresses = '127.0.0.1'\n"
                "unix_socket_directories = ''\n"
                f"max_prepared_transactions = {MAX_PREPARED}\n"
                "fsync = on\n"
            )

    def _run(self, cmd: list[str], what: str) -> None:
        if self._as_root:
            cmd = ["runuser", "-u", SERVER_USER, "--", *cmd]
        done = subprocess.run(
            cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd="/"
        )
        if done.returncode != 0:
            tail = ""
            with contextlib.suppress(FileNotFoundError, PermissionError):
                tail = "\n".join(self.log_file.read_text().splitlines()[-5:])
            raise BrokerError(
                f"{what} failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-500:]}" + (f"\n{tail}" if tail else "")
            )
