"""A real single-node Apache Kafka broker (KRaft) on 127.0.0.1, without Docker.

The broker is built from the official jars on Maven Central: `deploy/kafka/pom.xml`
is resolved with `mvn` into a cache directory (`kstream.infra.maven`), storage is
formatted on first start, and `kafka.Kafka` runs detached with its own log file.

Layout (in `kstream.infra.paths.cache_dir`)::

    <cache>/kafka-<version>/libs/*.jar       the classpath, shared by all brokers
    <cache>/broker-<port>/server.properties   this broker's config
    <cache>/broker-<port>/data/               KRaft metadata and topic logs
    <cache>/broker-<port>/logs/server.log     everything the JVM prints
    <cache>/broker-<port>/broker.pid          pid of the running JVM
    <cache>/broker-<port>/security-mode       plaintext or sasl-ssl, fixed at format time
    <cache>/broker-<port>/client.properties   with sasl-ssl: the ``--kafka-config`` file of
                                              a client user (`kstream.infra.broker_security`)

Contract: `start` is idempotent (a running broker is left alone), `stop` leaves no
java process behind, and a pid file whose process is gone or is not this broker
is treated as stale.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from string import Template

from kstream.errors import (
    BrokerError,
    ConfigurationError,
    DependencyResolutionError,
    PortInUseError,
)
from kstream.infra.broker_security import BrokerSecurity
from kstream.infra.client_settings import client_config
from kstream.infra.maven import resolve_maven_classpath
from kstream.infra.paths import cache_dir, deploy_dir, require_tool
from kstream.infra.processes import runs_with

__all__ = ["DEFAULT_PORT", "SECURITY_MODES", "BrokerInfo", "LocalBroker"]

#: Default listener port: far from Kafka's 9092 so a user's own Kafka never collides,
#: and below Linux's ephemeral range (32768-60999), where an outgoing connection of any
#: client may hold the port at the moment the broker binds it.
DEFAULT_PORT = 23092
#: The Kafka release the pom resolves (kept equal to `kafka.version` in deploy/kafka/pom.xml).
KAFKA_VERSION = "4.1.1"
#: Time for a cold JVM to format storage, elect itself controller and open its listener.
READY_TIMEOUT_S = 90.0
#: Time a broker gets to shut down cleanly on SIGTERM before it is killed.
STOP_TIMEOUT_S = 30.0
#: How clients reach the broker: no security, SCRAM users over TLS
#: (`kstream.infra.broker_security`), or that and ACLs (KRaft's StandardAuthorizer;
#: nothing is allowed but what is granted). A broker keeps the mode its storage was
#: formatted with.
SECURITY_MODES = ("plaintext", "sasl-ssl", "sasl-ssl-acls")

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    """Default progress sink: say nothing."""


def port_is_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on `host`:`port` (0.5 s to answer)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def resolve_jars(version: str = KAFKA_VERSION, log: Log = _quiet) -> Path:
    """Resolve the broker's classpath with mvn into the cache; return the libs directory."""
    libs = cache_dir() / f"kafka-{version}" / "libs"
    resolve_maven_classpath(
        deploy_dir() / "kafka" / "pom.xml",
        libs,
        properties={"kafka.version": version},
        what=f"Apache Kafka {version}",
        log=log,
    )
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise DependencyResolutionError(f"mvn succeeded but left no kafka jar in {libs}")
    return libs


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """What `status` reports about one local broker."""

    port: int
    pid: int | None
    directory: Path
    host: str = "127.0.0.1"

    @property
    def running(self) -> bool:
        return self.pid is not None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


class LocalBroker:
    """One local broker, identified by its listener port.

    The controller listens on ``port + 1``. All methods are safe to call from
    several processes in turn; they are not meant to run concurrently.
    """

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        version: str = KAFKA_VERSION,
        security: str | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        if not 1024 <= port <= 65534:
            raise ConfigurationError(f"broker port must be in 1024..65534, got {port}")
        if security is not None and security not in SECURITY_MODES:
            raise ConfigurationError(
                f"--security must be one of {', '.join(SECURITY_MODES)}, got {security!r}"
            )
        self.port = port
        #: The address the client listener binds and advertises (the controller's
        #: stays on 127.0.0.1): another address of this machine, such as a bridge
        #: that network-namespace test hosts reach, makes it reachable from there.
        self.host = host
        self.controller_port = port + 1
        self.version = version
        self.directory = cache_dir() / f"broker-{port}"
        #: The mode asked for; None: the mode the storage has, or plaintext for new storage.
        self.requested_security = security
        self.tls = BrokerSecurity(self.directory)

    @classmethod
    def from_env(cls) -> LocalBroker:
        """The broker on ``KSTREAM_BROKER_PORT`` (default `DEFAULT_PORT`)."""
        raw = os.environ.get("KSTREAM_BROKER_PORT", str(DEFAULT_PORT))
        try:
            port = int(raw)
        except ValueError:
            raise ConfigurationError(f"KSTREAM_BROKER_PORT must be a number, got {raw!r}") from None
        return cls(port)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.directory / "logs" / "server.log"

    @property
    def _pid_file(self) -> Path:
        return self.directory / "broker.pid"

    @property
    def _config_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def _mode_file(self) -> Path:
        return self.directory / "security-mode"

    @property
    def security(self) -> str:
        """The mode of this broker's storage if formatted, else the requested one (or plaintext)."""
        try:
            return self._mode_file.read_text().strip()
        except FileNotFoundError:
            formatted = (self.directory / "data" / "meta.properties").is_file()
            # Storage formatted before modes existed is plaintext.
            return "plaintext" if formatted else (self.requested_security or "plaintext")

    @property
    def client_properties(self) -> Path | None:
        """The ``--kafka-config`` file of this broker's client user (None without security)."""
        return self.tls.client_properties if self.security.startswith("sasl-ssl") else None

    def admin_settings(self) -> dict[str, str]:
        """librdkafka security settings of this broker's own user (none for plaintext)."""
        return self.tls.admin_settings() if self.security.startswith("sasl-ssl") else {}

    # -- inspection ---------------------------------------------------------

    def pid(self) -> int | None:
        """Pid of this broker's JVM if it is alive; clears a stale pid file."""
        try:
            pid = int(self._pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if self._is_our_jvm(pid):
            return pid
        # The process is gone, or the pid was reused by something else.
        self._pid_file.unlink(missing_ok=True)
        return None

    def _is_our_jvm(self, pid: int) -> bool:
        return runs_with(pid, str(self._config_file).encode())

    def status(self) -> BrokerInfo:
        return BrokerInfo(port=self.port, pid=self.pid(), directory=self.directory, host=self.host)

    # -- lifecycle ----------------------------------------------------------

    def start(self, log: Log = _quiet) -> BrokerInfo:
        """Start the broker unless it runs already; return once it accepts requests.

        Raises `ToolMissingError`, `PortInUseError`, `DependencyResolutionError` or
        `BrokerError` (with the tail of the broker's log) instead of hanging.
        """
        if (pid := self.pid()) is not None:
            log(f"broker already running (pid {pid})")
            self._await_ready(pid, log)
            return self.status()
        java = require_tool("java", "to run the Kafka broker (Java 17 or newer)")
        for h, p in ((self.host, self.port), ("127.0.0.1", self.controller_port)):
            if port_is_open(p, h):
                raise PortInUseError(
                    f"port {p} on {h} is in use by another process; "
                    "choose another with --port or KSTREAM_BROKER_PORT"
                )
        mode = self.security
        if self.requested_security not in (None, mode):
            raise ConfigurationError(
                f"the broker on port {self.port} was created with --security {mode}; "
                f"start it so, or stop it and delete {self.directory} to change"
            )
        if mode.startswith("sasl-ssl"):
            self.tls.ensure()
        libs = resolve_jars(self.version, log)
        self._write_config()
        classpath = f"{libs}/*"
        if not (self.directory / "data" / "meta.properties").is_file():
            self._format_storage(java, classpath, log)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            java,
            "-Xms256m",
            "-Xmx1g",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={deploy_dir() / 'kafka' / 'log4j2.properties'}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(self._config_file),
        ]
        log(f"starting Kafka {self.version} on {self.bootstrap} (log: {self.log_file})")
        with self.log_file.open("ab") as out:
            # A session of its own: Ctrl-C in the starting terminal must not kill the broker.
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        self._pid_file.write_text(f"{proc.pid}\n")
        self._await_ready(proc.pid, log, proc)
        if self.client_properties is not None:
            log(f"SASL_SSL listener; client settings: --kafka-config {self.client_properties}")
        return self.status()

    def stop(self, log: Log = _quiet) -> bool:
        """Stop the broker (SIGTERM, then SIGKILL after `STOP_TIMEOUT_S`).

        Returns False when no broker was running. Waits until the JVM is gone.
        """
        pid = self.pid()
        if pid is None:
            return False
        log(f"stopping broker (pid {pid})")
        self._signal(pid, signal.SIGTERM)
        if not self._wait_gone(pid, STOP_TIMEOUT_S):
            log("broker did not stop in time; killing it")
            self._signal(pid, signal.SIGKILL)
            self._wait_gone(pid, 10.0)
        self._pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> bool:
        """SIGKILL the broker, as a crash would. For fault-injection tests."""
        pid = self.pid()
        if pid is None:
            return False
        self._signal(pid, signal.SIGKILL)
        self._wait_gone(pid, 10.0)
        self._pid_file.unlink(missing_ok=True)
        return True

    def wipe(self) -> None:
        """Delete this broker's data (it must be stopped)."""
        if self.pid() is not None:
            raise BrokerError(f"broker on port {self.port} is running; stop it before wiping")
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- helpers ------------------------------------------------------------

    def _write_config(self) -> None:
        template = Template((deploy_dir() / "kafka" / "server.properties").read_text())
        self.directory.mkdir(parents=True, exist_ok=True)
        secured = self.security.startswith("sasl-ssl")
        text = template.substitute(
            port=self.port,
            host=self.host,
            controller_port=self.controller_port,
            log_dirs=self.directory / "data",
            listener="SASL_SSL" if secured else "PLAINTEXT",
        )
        if secured:
            text += self.tls.server_properties(acls=self.security == "sasl-ssl-acls")
        # It holds the admin user's password when secured: owner-readable only.
        self._config_file.touch(mode=0o600)
        self._config_file.chmod(0o600)
        self._config_file.write_text(text)

    def _format_storage(self, java: str, classpath: str, log: Log) -> None:
        log("formatting KRaft storage (first start)")
        mode = self.security
        base = [java, "-cp", classpath]
        tool = "org.apache.kafka.tools.StorageTool"
        quiet = f"-Dlog4j2.configurationFile={deploy_dir() / 'kafka' / 'log4j2.properties'}"
        # Kafka 4.x moved StorageTool from `kafka.tools` to `org.apache.kafka.tools`.
        probe = subprocess.run(
            [*base, quiet, tool, "random-uuid"], capture_output=True, text=True, check=False
        )
        if probe.returncode != 0:
            tool = "kafka.tools.StorageTool"
            probe = subprocess.run(
                [*base, quiet, tool, "random-uuid"], capture_output=True, text=True, check=False
            )
        match = re.search(r"^([A-Za-z0-9_-]{22})\s*$", probe.stdout, re.MULTILINE)
        if probe.returncode != 0 or match is None:
            raise BrokerError(f"Kafka's StorageTool failed: {_last_line(probe.stderr)}")
        fmt = subprocess.run(
            [
                *base,
                quiet,
                tool,
                "format",
                "--standalone",
                "-t",
                match.group(1),
                "-c",
                str(self._config_file),
                *(self.tls.scram_arguments() if mode.startswith("sasl-ssl") else []),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if fmt.returncode != 0:
            raise BrokerError(f"formatting Kafka storage failed: {_last_line(fmt.stderr)}")
        self._mode_file.write_text(f"{mode}\n")

    def _await_ready(self, pid: int, log: Log, proc: subprocess.Popen[bytes] | None = None) -> None:
        """Wait until the broker answers a metadata request, or fail with its log."""
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + READY_TIMEOUT_S
        admin = AdminClient(client_config(self.bootstrap, security=self.admin_settings()))
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                self._pid_file.unlink(missing_ok=True)
                raise BrokerError(
                    f"the broker exited with code {proc.returncode} while starting: "
                    f"{self._log_tail()} (full log: {self.log_file})"
                )
            if proc is None and not self._is_our_jvm(pid):
                raise BrokerError(f"the broker (pid {pid}) died; see {self.log_file}")
            if port_is_open(self.port, self.host):
                try:
                    md = admin.list_topics(timeout=2.0)
                except Exception:
                    md = None
                if md is not None and md.brokers:
                    return
            time.sleep(0.2)  # poll interval while the JVM boots
        raise BrokerError(
            f"the broker did not become ready within {READY_TIMEOUT_S:.0f}s; see {self.log_file}"
        )

    def _log_tail(self) -> str:
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return "no log written"
        errors = [ln for ln in lines if " ERROR " in ln or "Exception" in ln]
        return (errors or lines or ["empty log"])[-1].strip()

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    def _wait_gone(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # Reap it if we are its parent (this process started it).
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            # A JVM's main thread shows as a zombie while its other threads still
            # exit and hold the listening sockets: gone means the ports are free too.
            if not self._is_our_jvm(pid) and not any(
                port_is_open(p, h)
                for h, p in ((self.host, self.port), ("127.0.0.1", self.controller_port))
            ):
                return True
            time.sleep(0.1)
        return False


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def ensure_local_broker(log: Log = _quiet) -> str:
    """Start (if needed) the broker on ``KSTREAM_BROKER_PORT`` and return its bootstrap."""
    return LocalBroker.from_env().start(log).bootstrap


if __name__ == "__main__":  # pragma: no cover - use `kstream broker` instead
    sys.exit("use `kstream broker start|stop|status`")
