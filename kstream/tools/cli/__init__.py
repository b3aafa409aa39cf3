"""The `kstream` command line.

Built with Typer (typed options, generated help) and Rich (progress, tables).
Every `KStreamError` becomes one line on stderr and exit code 2; a failed job
or a failed verification exits 1.

One module per command group: `broker` (the local broker), `run` (``run`` and
``worker``), `checkpoints`, `status`, `savepoint`, `plan`, `demo`, `chaos`, `alive` (a
supervisor's liveness probe), `ui` (the web dashboard); the audit's command lives with the audit
(`kstream.tools.cli.audit`). Option types the commands share are in `options`,
the output consoles in `console`. This module assembles them into `app` and
holds `main`, the console script's entry point (also what ``python -m kstream``,
the way workers are spawned, runs).
"""

from __future__ import annotations

import sys

import typer

from kstream.errors import JobFailedError, KStreamError
from kstream.tools.cli.alive import alive_command
from kstream.tools.cli.audit import audit_command
from kstream.tools.cli.broker import broker_app
from kstream.tools.cli.chaos import chaos_command
from kstream.tools.cli.checkpoints import checkpoints_command
from kstream.tools.cli.console import err
from kstream.tools.cli.demo import demo_app
from kstream.tools.cli.plan import plan_command
from kstream.tools.cli.postgres import postgres_app
from kstream.tools.cli.run import run_command, worker_command
from kstream.tools.cli.savepoint import savepoint_command
from kstream.tools.cli.spark import spark_app
from kstream.tools.cli.state import state_app
from kstream.tools.cli.status import status_command
from kstream.tools.cli.ui import ui_command

__all__ = ["app", "main"]

app = typer.Typer(
    name="kstream",
    help="Exactly-once stream processing for Python on Apache Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(broker_app, name="broker")
app.add_typer(demo_app, name="demo")
app.command("run")(run_command)
app.command("worker")(worker_command)
app.command("checkpoints")(checkpoints_command)
app.command("status")(status_command)
app.command("savepoint")(savepoint_command)
app.command("plan")(plan_command)
app.command("audit")(audit_command)
app.command("chaos")(chaos_command)
app.command("alive")(alive_command)
app.command("ui")(ui_command)
app.add_typer(state_app, name="state")
app.add_typer(spark_app, name="spark")
app.add_typer(postgres_app, name="postgres")


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
