"""`kstream ui` and `kstream run --ui-port`: the job's web dashboard.

The page and its server are `kstream.tools.ui`; this module holds the options,
the command (which serves until Ctrl-C) and the runner's hook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from kstream.errors import ConfigurationError
from kstream.tools.cli.console import say
from kstream.tools.cli.options import (
    BootstrapOption,
    KafkaConfigOption,
    RequiredJobNameOption,
    number,
)

if TYPE_CHECKING:
    from kstream.protocol.identity import JobIdentity
    from kstream.tools.ui.server import Dashboard

__all__ = ["DEFAULT_UI_PORT", "UiAddressOption", "UiPortOption", "serve_run_ui", "ui_command"]

DEFAULT_UI_PORT = 8421

UiPortOption = Annotated[
    int,
    typer.Option(
        "--ui-port",
        help="Serve the job's web dashboard on this port (0: none).",
        callback=number(minimum=0, maximum=65535),
    ),
]
UiAddressOption = Annotated[
    str,
    typer.Option("--ui-address", help="The interface the dashboard listens on."),
]


def ui_command(
    job_name: RequiredJobNameOption,
    bootstrap_servers: BootstrapOption = None,
    kafka_config: KafkaConfigOption = None,
    port: Annotated[
        int,
        typer.Option(
            "--port", help="The dashboard's port.", callback=number(minimum=1, maximum=65535)
        ),
    ] = DEFAULT_UI_PORT,
    address: Annotated[
        str,
        typer.Option(
            "--address", help="The interface to listen on (0.0.0.0: every one; read-only)."
        ),
    ] = "127.0.0.1",
) -> None:
    """Serve a read-only web dashboard of a job, read from its control topic: from
    any machine, running or stopped; until Ctrl-C."""
    from kstream.infra.admin import Admin
    from kstream.infra.cluster import bootstrap_servers as resolve
    from kstream.protocol.names import control_topic
    from kstream.tools.ui.server import serve_ui

    bootstrap = resolve(bootstrap_servers, say)
    admin = Admin(bootstrap)
    admin.check_reachable()
    if admin.partitions(control_topic(job_name)) is None:
        raise ConfigurationError(f"job {job_name!r} has no control topic: it never ran here")
    dashboard = serve_ui(bootstrap, job_name, port, address)
    say(f"dashboard of job {job_name} on {dashboard.url} (Ctrl-C stops it)")
    try:
        threading.Event().wait()  # serves on its threads until Ctrl-C
    except KeyboardInterrupt:
        pass
    finally:
        dashboard.close()


def serve_run_ui(
    bootstrap: str,
    job: str,
    port: int,
    address: str,
    identity: JobIdentity,
    tell: Callable[[str], None],
) -> Dashboard | None:
    """`kstream run --ui-port`: serve the runner's own job (None: port 0, no dashboard)."""
    if not port:
        return None
    from kstream.tools.ui.server import serve_ui

    dashboard = serve_ui(bootstrap, job, port, address, identity)
    tell(f"dashboard: {dashboard.url}")
    return dashboard
