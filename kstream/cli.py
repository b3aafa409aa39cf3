"""The `kstream` command line.

Built with Typer (typed options, generated help) and Rich (progress, tables).
Every `KStreamError` becomes one line on stderr and exit code 2; a failed job
or a failed verification exits 1.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.console import Console

from kstream.broker import DEFAULT_PORT, LocalBroker
from kstream.errors import JobFailedError, KStreamError

__all__ = ["app", "main"]

app = typer.Typer(
    name="kstream",
    help="Exactly-once stream processing for Python on Apache Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
broker_app = typer.Typer(help="Run a local single-node Kafka broker (KRaft) from Maven Central.")
demo_app = typer.Typer(help="Self-contained demonstrations on the local broker.")
app.add_typer(broker_app, name="broker")
app.add_typer(demo_app, name="demo")

err = Console(stderr=True, soft_wrap=True)
out = Console()

PortOption = Annotated[
    int,
    typer.Option(
        "--port", envvar="KSTREAM_BROKER_PORT", help="Listener port (the controller uses port+1)."
    ),
]


def _say(message: str) -> None:
    err.print(f"[dim]kstream:[/dim] {message}", highlight=False)


@broker_app.command("start")
def broker_start(port: PortOption = DEFAULT_PORT) -> None:
    """Start the broker unless it runs; the last line printed is its bootstrap address."""
    info = LocalBroker(port).start(_say)
    print(info.bootstrap)


@broker_app.command("stop")
def broker_stop(port: PortOption = DEFAULT_PORT) -> None:
    """Stop the broker and wait until its JVM is gone."""
    if not LocalBroker(port).stop(_say):
        _say(f"no broker running on port {port}")


@broker_app.command("status")
def broker_status(port: PortOption = DEFAULT_PORT) -> None:
    """Say whether the broker runs; exit 0 if it does, 1 if not."""
    info = LocalBroker(port).status()
    if info.running:
        print(f"running pid={info.pid} bootstrap={info.bootstrap} dir={info.directory}")
    else:
        print(f"stopped bootstrap={info.bootstrap} dir={info.directory}")
        raise typer.Exit(1)


@demo_app.command("smoke")
def demo_smoke(
    records: Annotated[int, typer.Option(help="Records per transaction.")] = 1000,
    bootstrap_servers: Annotated[
        str | None, typer.Option(help="Kafka to use instead of the local broker.")
    ] = None,
) -> None:
    """Round-trip records through Kafka transactions: one committed, one aborted."""
    from kstream.demo import smoke

    if not smoke(records, bootstrap_servers, _say):
        raise JobFailedError("the transactional round trip did not read back what it committed")


# Commands defined in their own modules register here, one line each.


def main() -> None:
    """Entry point of the `kstream` console script."""
    try:
        app()
    except JobFailedError as exc:
        err.print(f"kstream: failed: {exc}", highlight=False, markup=False)
        sys.exit(1)
    except KStreamError as exc:
        err.print(f"kstream: error: {exc}", highlight=False, markup=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("kstream: interrupted", highlight=False)
        sys.exit(130)
