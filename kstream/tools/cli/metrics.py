"""`--metrics-port` and `--metrics-address` of `kstream run` and `kstream worker`.

The runner serves on the port it is given; worker i of a runner that spawns
its workers on ``port + 1 + i``; a worker started by hand on the port it is
given (a fixed port per pod). Every port is checked before the job touches
Kafka, so a port in use or out of range is one line at start-up.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from kstream.infra.metrics import MetricsServer, check_free, check_port, serve
from kstream.tools.cli.options import number

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kstream.runtime.config import RunConfig

__all__ = [
    "MetricsAddressOption",
    "MetricsPortOption",
    "check_worker_port",
    "serve_runner",
    "serve_worker",
    "worker_port",
]

MetricsPortOption = Annotated[
    int,
    typer.Option(
        "--metrics-port",
        help="Serve Prometheus metrics on this port (0: none). `kstream run` serves the "
        "coordinator's there and gives the worker of index i port + 1 + i.",
        callback=number(minimum=0, maximum=65535),
    ),
]
MetricsAddressOption = Annotated[
    str,
    typer.Option("--metrics-address", help="The interface the metrics endpoints listen on."),
]


def _url(address: str, port: int) -> str:
    host = socket.gethostname() if address in ("0.0.0.0", "::", "") else address
    return f"http://{host}:{port}/metrics"


def worker_port(config: RunConfig, index: int, *, spawned: bool, option: int) -> int:
    """The port worker `index` serves on (0: none): `option`, or the runner's scheme."""
    if spawned:
        return config.metrics_port + 1 + index if config.metrics_port else 0
    return option


def check_worker_port(port: int, address: str) -> None:
    """Refuse a worker's port before it touches Kafka (no-op for 0)."""
    if port:
        check_free(port, address, what="kstream worker --metrics-port")


def serve_runner(
    config: RunConfig, registry: CollectorRegistry, say: Callable[[str], None]
) -> MetricsServer | None:
    """Check every port of the run, serve the coordinator's `registry`, say where each
    process serves; None without --metrics-port."""
    port, address = config.metrics_port, config.metrics_address
    if not port:
        return None
    check_port(port)
    spawned = config.workers if config.start.spawn else 0
    check_port(port + spawned, "--metrics-port + --workers")
    for i in range(spawned):
        check_free(port + 1 + i, address, what=f"worker {i}'s metrics (--metrics-port + {1 + i})")
    server = serve(registry, port, address, what="kstream run --metrics-port")
    where = [f"coordinator on {_url(address, port)}"]
    where += [f"w{i} on {_url(address, port + 1 + i)}" for i in range(spawned)]
    say("metrics: " + ", ".join(where))
    return server


def serve_worker(
    registry: CollectorRegistry, port: int, address: str, index: int
) -> MetricsServer | None:
    """Serve worker `index`'s `registry` on `port` (None for 0)."""
    if not port:
        return None
    return serve(registry, port, address, what=f"worker {index}'s metrics")
