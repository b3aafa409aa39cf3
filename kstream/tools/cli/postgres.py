"""`kstream postgres start|stop|status`: the local PostgreSQL server of `kstream.infra.postgres`;
`kstream postgres prepared`: the PostgreSQL sink's prepared transactions on any server, by job."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kstream.errors import ConfigurationError
from kstream.infra.postgres import DEFAULT_PORT, LocalPostgres
from kstream.tools.cli.console import say
from kstream.tools.cli.options import (
    CheckpointStorageOption,
    JobNameOption,
    S3EndpointOption,
    StateDirOption,
    number,
)

__all__ = ["postgres_app"]

postgres_app = typer.Typer(
    help="Run a local PostgreSQL server (Debian's packages) for the PostgreSQL sink's "
    "tests and examples."
)

PgPortOption = Annotated[
    int,
    typer.Option(
        "--port",
        envvar="KSTREAM_POSTGRES_PORT",
        help="TCP port on 127.0.0.1.",
        callback=number(minimum=1024, maximum=65535),
    ),
]


@postgres_app.command("start")
def postgres_start(port: PgPortOption = DEFAULT_PORT) -> None:
    """Start the server unless it runs; the last line printed is its URL."""
    print(LocalPostgres(port).start(say).url)


@postgres_app.command("stop")
def postgres_stop(port: PgPortOption = DEFAULT_PORT) -> None:
    """Stop the server (fast shutdown) and wait until it is gone."""
    if not LocalPostgres(port).stop(say):
        say(f"no postgres running on port {port}")


@postgres_app.command("status")
def postgres_status(port: PgPortOption = DEFAULT_PORT) -> None:
    """Say whether the server runs; exit 0 if it does, 1 if not."""
    info = LocalPostgres(port).status()
    state = f"running pid={info.pid}" if info.running else "stopped"
    print(f"{state} url={info.url} dir={info.directory}")
    if not info.running:
        raise typer.Exit(1)


@postgres_app.command("prepared")
def postgres_prepared(
    url: Annotated[
        str,
        typer.Option("--url", help="The server, e.g. postgresql://user@host:5432/db."),
    ],
    job_name: JobNameOption = None,
    rollback: Annotated[
        bool,
        typer.Option(
            "--rollback",
            help="Roll back the listed transactions of --job-name (in the URL's database); "
            "refused while the job has checkpoints, unless --force.",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Roll back even though the job's checkpoints exist."),
    ] = False,
    state_dir: StateDirOption = Path("state"),
    checkpoint_storage: CheckpointStorageOption = "",
    s3_endpoint_url: S3EndpointOption = "",
) -> None:
    """List the PostgreSQL sink's prepared transactions by job, and whether each job
    still has checkpoints (where `kstream run` with the same --state-dir or
    --checkpoint-storage keeps them): a job without any was deleted, and its
    transactions stay prepared until rolled back (--job-name NAME --rollback)."""
    from kstream.connectors.postgres.prepared import list_prepared, roll_back
    from kstream.connectors.postgres.schema import connect

    if rollback and job_name is None:
        raise ConfigurationError(
            "--rollback needs --job-name: it rolls back one job's transactions"
        )
    with connect(url, "kstream-cli", autocommit=True) as conn:
        listed = list_prepared(conn, job_name)
        row = conn.execute("SELECT current_database()").fetchone()
        here = str(row[0]) if row else ""
        if not listed:
            print(f"no prepared transactions of {'job ' + job_name if job_name else 'kstream'}")
            return
        stored = {
            job: _stored_checkpoints(job, state_dir, checkpoint_storage, s3_endpoint_url)
            for job in sorted({p.job for p in listed})
        }
        for job, ids in stored.items():
            mine = [p for p in listed if p.job == job]
            kept = f"{len(ids)} stored checkpoints" if ids else "no stored checkpoints"
            print(f"job {job}: {len(mine)} prepared, {kept}")
            for p in mine:
                print(
                    f"  {p.gid}  database={p.database} owner={p.owner} "
                    f"prepared={p.prepared_at.isoformat(timespec='seconds')}"
                )
        if not rollback:
            orphans = [job for job, ids in stored.items() if not ids]
            if orphans:
                say(
                    "jobs without checkpoints left these behind; roll them back with "
                    "`kstream postgres prepared --url URL --job-name NAME --rollback` "
                    "(or ROLLBACK PREPARED '<gid>' in their database)"
                )
            return
        assert job_name is not None
        if stored.get(job_name) and not force:
            raise ConfigurationError(
                f"job {job_name} still has {len(stored[job_name])} checkpoints: its next run "
                "commits or rolls these back itself; delete its checkpoints first, or --force"
            )
        elsewhere = sorted({p.database for p in listed if p.database != here})
        done = roll_back(conn, [p.gid for p in listed if p.database == here])
    print(f"rolled back {len(done)} prepared transactions of job {job_name}")
    if elsewhere:
        say(f"others are in database {', '.join(elsewhere)}: run again with its URL")


def _stored_checkpoints(
    job: str, state_dir: Path, checkpoint_storage: str, s3_endpoint_url: str
) -> list[int]:
    """Ids of job `job`'s stored checkpoints, where `kstream run` keeps them."""
    from kstream.runtime.checkpoint.open import open_storage
    from kstream.runtime.config import JobRef, RunConfig

    if not checkpoint_storage and not (state_dir / job / "checkpoints").is_dir():
        return []  # no directory to create just to look
    config = RunConfig(
        JobRef("", {}),
        "",
        1,
        state_dir,
        checkpoint_storage=checkpoint_storage,
        s3_endpoint_url=s3_endpoint_url,
    )
    return open_storage(config, job, probe=False).completed()
