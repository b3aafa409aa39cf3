"""A local Spark standalone cluster from the installed pyspark, for tests and demos.

A master and `workers` workers, each a JVM of its own on 127.0.0.1, started
with pyspark's ``bin/spark-class`` (``org.apache.spark.deploy.master.Master``,
``org.apache.spark.deploy.worker.Worker``; the pip package has no ``sbin/``
scripts). State under ``<cache>/spark-cluster-<port>/`` (pid files, logs,
the workers' work directories), started and stopped like the local broker
(`kstream.infra.broker`): idempotent, every JVM in a session of its own, each
recognised by a system property naming that directory on its command line
(a reused pid is never taken for ours).

Jobs connect with ``spark://127.0.0.1:<port>``. Nothing is installed on the
cluster: a job's jars (the Kafka connector's, ``spark.jars``) are shipped to
the executors by Spark, and executors run the driver's Python
(``PYSPARK_PYTHON``), which is this machine's.

`check_master` is what every Spark job of the project calls first: a
``spark://`` master that does not accept a connection fails in seconds with
one line, rather than after Spark's retries.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kstream.errors import ConfigurationError, EnvironmentSetupError, PortInUseError
from kstream.infra.paths import cache_dir
from kstream.infra.processes import runs_with

__all__ = [
    "DEFAULT_MASTER_PORT",
    "ClusterInfo",
    "SparkCluster",
    "check_master",
]

Log = Callable[[str], None]
#: The master's port by default (Spark's own default is 7077; kept apart from it).
DEFAULT_MASTER_PORT = 23077
#: How long a master or worker gets to come up / to go.
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
#: How long `check_master` waits for a master to accept a connection.
CONNECT_TIMEOUT_S = 3.0
_REGISTERED = "Successfully registered with master"


def _quiet(_: str) -> None:
    """No progress output."""


def check_master(master: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise `EnvironmentSetupError` (one line) unless a ``spark://`` `master` accepts
    a connection within `timeout_s` (every host of a ``spark://a:1,b:2`` list is tried).
    Other masters (``local[*]``, ``yarn``, ``k8s://``) are left to Spark."""
    if not master.startswith("spark://"):
        return
    hosts = master[len("spark://") :].split(",")
    causes = []
    for hostport in hosts:
        parts = urlsplit(f"//{hostport}")
        if parts.hostname is None or parts.port is None:
            raise ConfigurationError(f"Spark master {master!r}: expected spark://host:port")
        try:
            with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s):
                return
        except OSError as exc:
            causes.append(f"{hostport}: {exc.strerror or exc}")
    raise EnvironmentSetupError(f"Spark master {master} is unreachable ({'; '.join(causes)})")


def _port_is_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def spark_home() -> Path:
    """The installed pyspark's directory (it holds ``bin/spark-class`` and ``jars/``)."""
    try:
        import pyspark
    except ImportError:
        raise EnvironmentSetupError(
            "a Spark cluster needs pyspark, which is not installed: pip install 'kstream[audit]'"
        ) from None
    return Path(pyspark.__file__).parent


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What runs: the master's pid and URL, and each worker's pid (None: not running)."""

    master_url: str
    master_pid: int | None
    worker_pids: tuple[int | None, ...]

    @property
    def running(self) -> bool:
        return self.master_pid is not None and all(p is not None for p in self.worker_pids)


class SparkCluster:
    """The local standalone cluster whose master listens on `port`, with `workers`
    workers of `cores` cores and `memory` each (0 workers: a master alone, which
    gives applications no executor)."""

    def __init__(
        self,
        port: int = DEFAULT_MASTER_PORT,
        workers: int = 2,
        *,
        cores: int = 1,
        memory: str = "1g",
    ) -> None:
        if not 1024 <= port <= 65535:
            raise ConfigurationError(f"Spark master port must be in 1024..65535, got {port}")
        if workers < 0:
            raise ConfigurationError(f"--workers must be at least 0, got {workers}")
        self.port = port
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.directory = cache_dir() / f"spark-cluster-{port}"

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _pid_file(self, role: str) -> Path:
        return self.directory / f"{role}.pid"

    def log_file(self, role: str) -> Path:
        """The log of ``master`` or ``worker-<i>``."""
        return self.directory / "logs" / f"{role}.log"

    def _roles(self) -> list[str]:
        """Every role with a pid file or configured (workers beyond `workers` included)."""
        found = {p.stem for p in self.directory.glob("worker-*.pid")}
        found |= {f"worker-{i}" for i in range(self.workers)}
        return sorted(found)

    def pid(self, role: str) -> int | None:
        """The pid of `role`'s JVM if it is alive and ours; clears a stale pid file."""
        try:
            pid = int(self._pid_file(role).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if self._is_ours(pid, role):
            return pid
        self._pid_file(role).unlink(missing_ok=True)
        return None

    def _marker(self, role: str) -> str:
        return f"-Dkstream.spark.cluster={self.directory}/{role}"

    def _is_ours(self, pid: int, role: str) -> bool:
        return runs_with(pid, self._marker(role).encode())

    def status(self) -> ClusterInfo:
        return ClusterInfo(
            self.master_url,
            self.pid("master"),
            tuple(self.pid(f"worker-{i}") for i in range(self.workers)),
        )

    def _launch(self, role: str, main_class: str, args: list[str]) -> subprocess.Popen[bytes]:
        home = spark_home()
        env = dict(os.environ)
        env["SPARK_HOME"] = str(home)
        # Read by spark-class for daemons (Master, Worker): names the JVM as ours.
        env["SPARK_DAEMON_JAVA_OPTS"] = f"{self._marker(role)} -Dspark.master.rest.enabled=false"
        env["SPARK_DAEMON_MEMORY"] = "512m"
        log = self.log_file(role)
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            # A session of its own: Ctrl-C in the starting terminal must not stop it.
            proc = subprocess.Popen(
                [str(home / "bin" / "spark-class"), main_class, *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        # spark-class runs a launcher, then execs the JVM in the same process.
        self._pid_file(role).write_text(f"{proc.pid}\n")
        return proc

    def start(self, log: Log = _quiet) -> ClusterInfo:
        """Start whatever of the master and workers is not running; return once every
        worker has registered with the master. Raises `PortInUseError` or
        `EnvironmentSetupError` (with the log's last error line) instead of hanging."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.pid("master") is None:
            if _port_is_open(self.port):
                raise PortInUseError(
                    f"port {self.port} on 127.0.0.1 is in use by another process; "
                    "choose another with --port"
                )
            log(f"starting Spark master on {self.master_url} (log: {self.log_file('master')})")
            master = self._launch(
                "master",
                "org.apache.spark.deploy.master.Master",
                ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", "0"],
            )
            self._await(lambda: _port_is_open(self.port), master, "master", "accepts connections")
        started = []
        for i in range(self.workers):
            role = f"worker-{i}"
            if self.pid(role) is not None:
                continue
            work = self.directory / role
            work.mkdir(parents=True, exist_ok=True)
            # Registration is judged from the log: a fresh log per start.
            self.log_file(role).unlink(missing_ok=True)
            log(f"starting Spark {role} (log: {self.log_file(role)})")
            proc = self._launch(
                role,
                "org.apache.spark.deploy.worker.Worker",
                ["--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                 "--work-dir", str(work), "--webui-port", "0", self.master_url],
            )  # fmt: skip
            started.append((role, proc))
        for role, proc in started:
            self._await(lambda r=role: _REGISTERED in self._log_text(r), proc, role, "registered")  # type: ignore[misc]
        return self.status()

    def _log_text(self, role: str) -> str:
        try:
            return self.log_file(role).read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _await(
        self, ready: Callable[[], bool], proc: subprocess.Popen[bytes], role: str, what: str
    ) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            if proc.poll() is not None:
                self._pid_file(role).unlink(missing_ok=True)
                raise EnvironmentSetupError(
                    f"Spark {role} exited while starting: {self._tail(role)} "
                    f"(log: {self.log_file(role)})"
                )
            if time.monotonic() > deadline:
                raise EnvironmentSetupError(
                    f"Spark {role} not {what} after {START_TIMEOUT_S:.0f} s: {self._tail(role)}"
                )
            time.sleep(0.2)

    def _tail(self, role: str) -> str:
        lines = self._log_text(role).splitlines()
        errors = [ln for ln in lines if " ERROR " in ln or "Exception" in ln]
        return (errors or lines or ["empty log"])[-1].strip()

    def stop(self, log: Log = _quiet, roles: list[str] | None = None) -> bool:
        """Stop `roles` (default: every worker, then the master): SIGTERM, then
        SIGKILL after `STOP_TIMEOUT_S`. Returns False when none was running."""
        chosen = roles if roles is not None else [*self._roles(), "master"]
        stopped = False
        for role in chosen:
            pid = self.pid(role)
            if pid is None:
                continue
            log(f"stopping Spark {role} (pid {pid})")
            self._signal(pid, signal.SIGTERM)
            if not self._wait_gone(pid, role, STOP_TIMEOUT_S):
                self._signal(pid, signal.SIGKILL)
                self._wait_gone(pid, role, 10.0)
            self._pid_file(role).unlink(missing_ok=True)
            stopped = True
        return stopped

    def kill(self, role: str) -> bool:
        """SIGKILL `role` (e.g. ``worker-1``), as a crash would. For fault-injection tests."""
        pid = self.pid(role)
        if pid is None:
            return False
        self._signal(pid, signal.SIGKILL)
        self._wait_gone(pid, role, 10.0)
        self._pid_file(role).unlink(missing_ok=True)
        return True

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def _wait_gone(self, pid: int, role: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if not self._is_ours(pid, role):
                return True
            time.sleep(0.1)
        return False
