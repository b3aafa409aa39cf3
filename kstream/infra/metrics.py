"""Serve a Prometheus registry over HTTP (``/metrics``) from a daemon thread.

What is served is the caller's: the worker's and the runner's collectors live
in `kstream.runtime` (they record, this module only serves). The server is
`prometheus_client`'s threaded WSGI server; every request is answered on a
thread of its own, so a slow scraper never holds up the process's main loop,
which only ever takes the locks of per-checkpoint histograms.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    ProcessCollector,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from kstream.errors import ConfigurationError

__all__ = ["MetricsServer", "ProcessMetrics", "check_free", "check_port", "serve"]


class ProcessMetrics(Collector):
    """The process's RSS, CPU seconds, open files and start time (prometheus_client's
    `ProcessCollector`, Linux ``/proc``), each sample with `labels` added.

    Without them a worker's ``process_*`` series could be told apart only by the
    scrape target: with them they join the job's other series on ``job`` and
    ``worker``.
    """

    def __init__(self, labels: Mapping[str, str], registry: CollectorRegistry) -> None:
        self._labels = dict(labels)
        self._inner = ProcessCollector(registry=None)
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        for fam in self._inner.collect():
            out = Metric(fam.name, fam.documentation, fam.type, fam.unit)
            for s in fam.samples:
                out.add_sample(s.name, {**s.labels, **self._labels}, s.value, s.timestamp)
            yield out


def check_port(port: int, option: str = "--metrics-port") -> None:
    """Refuse a port outside 1..65535 with one line naming `option`."""
    if not 1 <= port <= 65535:
        raise ConfigurationError(f"{option} must be in 1..65535, got {port}")


@dataclass(frozen=True)
class MetricsServer:
    """A running endpoint: ``http://{address}:{port}/metrics``."""

    address: str
    port: int
    _server: Any
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.address in ("", "0.0.0.0", "::") else self.address
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and free the port; returns once the thread has ended."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def serve(
    registry: CollectorRegistry, port: int, address: str = "0.0.0.0", *, what: str = "metrics"
) -> MetricsServer:
    """Serve `registry` on `address`:`port` until `MetricsServer.close` or the process ends.

    Raises `ConfigurationError` with one line naming `what` (whose endpoint) for
    a port outside 1..65535 or one that cannot be bound: a configuration error,
    since a process restarted on the same port would meet the same refusal.
    """
    check_port(port)
    # No ``*_created`` series: a process's start time is `process_start_time_seconds`
    # already, and they would double the series of every counter (process-wide).
    disable_created_metrics()  # type: ignore[no-untyped-call]
    try:
        server, thread = start_http_server(port, address, registry)
    except OSError as exc:
        raise _refusal(what, address, port, exc) from None
    return MetricsServer(address, port, server, thread)


def check_free(port: int, address: str = "0.0.0.0", *, what: str = "metrics") -> None:
    """Refuse (`ConfigurationError`, one line) a port `serve` could not bind now.

    For ports other processes will serve on (the workers a runner spawns):
    checked before they start, so the job stops at once instead of each worker
    failing on its own.
    """
    check_port(port)
    probe = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET)
    try:
        # As the HTTP server binds (it sets SO_REUSEADDR): TIME_WAIT is no conflict.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((address, port))
    except OSError as exc:
        raise _refusal(what, address, port, exc) from None
    finally:
        probe.close()


def _refusal(what: str, address: str, port: int, exc: OSError) -> ConfigurationError:
    if exc.errno == errno.EADDRINUSE:
        return ConfigurationError(
            f"{what}: port {port} on {address} is in use (choose another --metrics-port)"
        )
    return ConfigurationError(f"{what}: cannot serve on {address}:{port}: {exc.strerror or exc}")
