"""`kstream broker start|stop|status`: the local broker of `kstream.infra.broker`."""

from __future__ import annotations

from typing import Annotated

import typer

from kstream.infra.broker import DEFAULT_PORT, LocalBroker
from kstream.tools.cli.console import say
from kstream.tools.cli.options import PortOption

__all__ = ["broker_app"]

broker_app = typer.Typer(help="Run a local single-node Kafka broker (KRaft) from Maven Central.")


@broker_app.command("start")
def broker_start(
    port: PortOption = DEFAULT_PORT,
    security: Annotated[
        str | None,
        typer.Option(
            "--security",
            help="plaintext, sasl-ssl (SCRAM-SHA-512 users over TLS, a CA made at first "
            "start; the client settings file is printed) or sasl-ssl-acls (and ACLs "
            "enforced). Default: the broker's existing mode, plaintext for a new one.",
        ),
    ] = None,
) -> None:
    """Start the broker unless it runs; the last line printed is its bootstrap address."""
    info = LocalBroker(port, security=security).start(say)
    print(info.bootstrap)


@broker_app.command("stop")
def broker_stop(port: PortOption = DEFAULT_PORT) -> None:
    """Stop the broker and wait until its JVM is gone."""
    if not LocalBroker(port).stop(say):
        say(f"no broker running on port {port}")


@broker_app.command("status")
def broker_status(port: PortOption = DEFAULT_PORT) -> None:
    """Say whether the broker runs; exit 0 if it does, 1 if not."""
    info = LocalBroker(port).status()
    if info.running:
        print(f"running pid={info.pid} bootstrap={info.bootstrap} dir={info.directory}")
    else:
        print(f"stopped bootstrap={info.bootstrap} dir={info.directory}")
        raise typer.Exit(1)
