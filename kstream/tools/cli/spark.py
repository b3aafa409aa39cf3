"""`kstream spark start|stop|status`: the local Spark standalone cluster of
`kstream.infra.spark_cluster` (a master and workers on 127.0.0.1)."""

from __future__ import annotations

from typing import Annotated

import typer

from kstream.infra.spark_cluster import DEFAULT_MASTER_PORT, SparkCluster
from kstream.tools.cli.console import say
from kstream.tools.cli.options import AT_LEAST_ONE, PORT

__all__ = ["spark_app"]

spark_app = typer.Typer(help="Run a local Spark standalone cluster from the installed pyspark.")

MasterPortOption = Annotated[int, typer.Option("--port", help="The master's port.", callback=PORT)]
WorkersOption = Annotated[
    int, typer.Option("--workers", help="Workers (one JVM each).", callback=AT_LEAST_ONE)
]


@spark_app.command("start")
def spark_start(port: MasterPortOption = DEFAULT_MASTER_PORT, workers: WorkersOption = 2) -> None:
    """Start the master and workers unless they run; the last line printed is the master URL."""
    info = SparkCluster(port, workers).start(say)
    print(info.master_url)


@spark_app.command("stop")
def spark_stop(port: MasterPortOption = DEFAULT_MASTER_PORT) -> None:
    """Stop every worker and the master, and wait until their JVMs are gone."""
    if not SparkCluster(port).stop(say):
        say(f"no Spark cluster running on port {port}")


@spark_app.command("status")
def spark_status(port: MasterPortOption = DEFAULT_MASTER_PORT, workers: WorkersOption = 2) -> None:
    """Print the master URL and each JVM's pid; exit 1 unless all run."""
    info = SparkCluster(port, workers).status()
    print(f"master {info.master_url} pid {info.master_pid or 'not running'}")
    for i, pid in enumerate(info.worker_pids):
        print(f"worker-{i} pid {pid or 'not running'}")
    if not info.running:
        raise typer.Exit(1)
