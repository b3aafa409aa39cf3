"""A local S3-compatible object store: S3Proxy over a directory.

Tests and benchmarks keep checkpoints in it (``--checkpoint-storage s3://...``).
S3Proxy (``org.gaul:s3proxy``, `deploy/s3proxy/pom.xml`) is resolved with mvn
into the cache like the broker's jars (`kstream.infra.maven`)::

    <cache>/s3proxy-<version>/libs/*.jar

and started as ``org.gaul.s3proxy.Main --properties FILE`` with jclouds'
filesystem provider: buckets are directories under `basedir`, objects files.
A stopped store started again on the same directory and address serves the same
objects (the fault tests rely on it).

Clients authenticate with AWS signatures (v2 or v4) as `IDENTITY`/`CREDENTIAL`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kstream.errors import DependencyResolutionError, EnvironmentSetupError, PortInUseError
from kstream.infra.broker import port_is_open
from kstream.infra.maven import resolve_maven_classpath
from kstream.infra.paths import cache_dir, deploy_dir, require_tool

__all__ = ["CREDENTIAL", "IDENTITY", "S3PROXY_VERSION", "ObjectStore", "resolve_s3proxy"]

#: The S3Proxy release the pom resolves (kept equal to `s3proxy.version` in its pom).
S3PROXY_VERSION = "2.6.0"
#: The access key and secret clients sign with (a local test store's, not a secret).
IDENTITY = "kstream"
CREDENTIAL = "kstream-local-secret"
#: Time for a cold JVM to load S3Proxy and open its port.
READY_TIMEOUT_S = 60.0
#: Time S3Proxy gets to exit on SIGTERM before it is killed.
STOP_TIMEOUT_S = 10.0

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    """Default progress sink: say nothing."""


def resolve_s3proxy(log: Log = _quiet) -> Path:
    """Resolve S3Proxy's classpath with mvn into the cache (once); return the libs directory."""
    libs = cache_dir() / f"s3proxy-{S3PROXY_VERSION}" / "libs"
    resolve_maven_classpath(
        deploy_dir() / "s3proxy" / "pom.xml",
        libs,
        properties={"s3proxy.version": S3PROXY_VERSION},
        what=f"S3Proxy {S3PROXY_VERSION}",
        log=log,
    )
    if not any(libs.glob("s3proxy-*.jar")):
        raise DependencyResolutionError(f"mvn succeeded but left no s3proxy jar in {libs}")
    return libs


@dataclass
class ObjectStore:
    """One S3Proxy process serving `basedir` on http://`host`:`port`.

    `start` returns once the port answers; `stop` ends the process (SIGTERM,
    then SIGKILL); `pause`/`resume` stop and continue it (SIGSTOP/SIGCONT):
    requests then hang rather than fail, as with a store that stopped answering.
    """

    basedir: Path
    port: int
    host: str = "127.0.0.1"
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        """The URL clients send requests to (``--s3-endpoint-url``)."""
        return f"http://{self.host}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """Environment variables pointing boto3 at this store with its credentials."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": IDENTITY,
            "AWS_SECRET_ACCESS_KEY": CREDENTIAL,
            "AWS_REGION": "us-east-1",
        }

    def start(self, log: Log = _quiet) -> None:
        """Start S3Proxy; `PortInUseError` if the port is taken, `EnvironmentSetupError`
        (with the log's last line) if it exits or does not answer in time."""
        if port_is_open(self.port, self.host):
            raise PortInUseError(f"{self.host}:{self.port} is in use: cannot start S3Proxy there")
        java = require_tool("java", "to run S3Proxy")
        libs = resolve_s3proxy(log)
        self.basedir.mkdir(parents=True, exist_ok=True)
        props = self.basedir.parent / f"s3proxy-{self.port}.properties"
        props.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint=http://{self.host}:{self.port}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={IDENTITY}",
                    f"s3proxy.credential={CREDENTIAL}",
                    "jclouds.provider=filesystem",
                    f"jclouds.filesystem.basedir={self.basedir}",
                    "",
                ]
            )
        )
        out = (self.basedir.parent / f"s3proxy-{self.port}.log").open("ab")
        self.proc = subprocess.Popen(
            [java, "-cp", f"{libs}/*", "org.gaul.s3proxy.Main", "--properties", str(props)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        out.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not port_is_open(self.port, self.host):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise EnvironmentSetupError(
                    f"S3Proxy did not start on {self.endpoint}: {self._log_tail()}"
                )
            time.sleep(0.1)  # polling a port: nothing to wait on
        log(f"S3Proxy serving {self.basedir} on {self.endpoint}")

    def _log_tail(self) -> str:
        path = self.basedir.parent / f"s3proxy-{self.port}.log"
        try:
            lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no log"
        return lines[-1] if lines else "no output"

    def pause(self) -> None:
        """Stop the process (SIGSTOP): its port accepts connections nobody answers."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Continue a paused process (SIGCONT)."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """End the process (SIGTERM, SIGKILL after `STOP_TIMEOUT_S`); idempotent."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGCONT)  # a paused JVM handles no SIGTERM
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
